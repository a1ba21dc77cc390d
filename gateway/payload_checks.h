// Verifies a request body while it streams past: the MD5 every object needs
// for its ETag (and Content-MD5), the SHA-256 a signed payload names, and an
// x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256} given in a header or
// in the aws-chunked trailer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "gateway/request.h"
#include "gateway/sigv4_verify.h"
#include "util/bytes.h"
#include "util/crc.h"
#include "util/digest.h"

namespace keel::gateway {

// One of S3's checksum algorithms, computed over a stream.
class Checksummer {
 public:
  // "crc32", "crc32c", "crc64nvme", "sha1", "sha256"; nullopt for others.
  static std::optional<Checksummer> make(const std::string& name);
  void update(ByteView data);
  std::string base64();  // of the big-endian digest, as S3 shows it; once
  // Throws S3Error InvalidRequest unless `value` could be such a digest:
  // base64 of the algorithm's size (checked before the body is read, where
  // the value comes in a header).
  void check_well_formed(const std::string& value) const;
  const std::string& name() const { return name_; }

 private:
  Checksummer(std::string name, std::variant<Crc, Digest> algorithm, size_t size)
      : name_(std::move(name)), algorithm_(std::move(algorithm)), size_(size) {}
  std::string name_;
  std::variant<Crc, Digest> algorithm_;
  size_t size_;  // bytes of the digest
};
// As make(), but throws S3Error InvalidRequest for an unknown name.
Checksummer checksummer_for(const std::string& name);
// "crc64nvme" -> "ChecksumCRC64NVME", the element S3's XML documents use.
std::string checksum_element(const std::string& algorithm);

struct ObjectChecksum {
  std::string algorithm;  // "crc32", "crc32c", "crc64nvme", "sha1", "sha256"
  std::string value;      // base64 of the big-endian digest, as S3 shows it
};

// What a request's x-amz-checksum-* headers describe: its body, or (on
// CompleteMultipartUpload) the object it completes, which the body is not.
enum class ChecksumHeaders { kOfBody, kOfObject };

class PayloadChecks {
 public:
  // Reads Content-MD5, x-amz-checksum-* (unless kOfObject), x-amz-sdk-checksum-algorithm and
  // x-amz-trailer. Throws S3Error InvalidDigest (malformed Content-MD5) or
  // InvalidRequest (malformed or conflicting checksum headers).
  PayloadChecks(const S3Request& request, const Authentication& auth,
                ChecksumHeaders checksum_headers = ChecksumHeaders::kOfBody);
  ~PayloadChecks();
  PayloadChecks(PayloadChecks&&) noexcept;

  void update(ByteView data);
  // Compares everything with what the client sent, taking checksums the
  // request announced for its trailer from `trailers`. Throws S3Error
  // BadDigest, XAmzContentSHA256Mismatch or InvalidRequest.
  void verify(const NameValues& trailers);

  // After verify(): the body's MD5 in hex, and its checksum if one was sent.
  const std::string& md5_hex() const { return md5_hex_; }
  const std::optional<ObjectChecksum>& checksum() const { return checksum_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string md5_hex_;
  std::optional<ObjectChecksum> checksum_;
};

}  // namespace keel::gateway
