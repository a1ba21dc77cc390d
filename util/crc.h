// The CRCs S3 offers as object checksums (x-amz-checksum-crc32, -crc32c,
// -crc64nvme): reflected, initial value and final xor all ones. CRC-32 and
// CRC-32C run on ISA-L (carry-less multiply and the SSE4.2 crc32 instruction:
// gigabytes per second, where a gateway checks every upload).
#pragma once

#include <cstdint>

#include "util/bytes.h"

namespace keel {

enum class CrcAlgorithm {
  kCrc32,      // ISO-HDLC, as zlib: polynomial 0x04C11DB7
  kCrc32c,     // Castagnoli: 0x1EDC6F41
  kCrc64Nvme,  // NVM Express: 0xAD93D23594C93659
};

class Crc {
 public:
  explicit Crc(CrcAlgorithm algorithm);
  void update(ByteView data);
  uint64_t value() const;
  // The value in big-endian bytes (4 or 8), the form S3 base64-encodes.
  Bytes big_endian() const;

 private:
  CrcAlgorithm algorithm_;
  uint64_t state_;
};

uint64_t crc(CrcAlgorithm algorithm, ByteView data);

// The CRC of A followed by B from crc(A), crc(B) and B's length, without the
// bytes (zlib's crc32_combine, for any of the three): how a multipart
// upload's full-object checksum follows from its parts'.
uint64_t crc_combine(CrcAlgorithm algorithm, uint64_t crc_a, uint64_t crc_b, uint64_t length_b);

}  // namespace keel
