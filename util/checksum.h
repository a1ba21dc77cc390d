// XXH3 checksums (xxHash): 64-bit over stored blobs, 128-bit over whole
// packs and restored files. Not cryptographic; they find bit rot fast.
#pragma once

#include <xxhash.h>

#include <array>
#include <cstdint>

#include "util/bytes.h"

namespace keel {

// On AVX2 where the CPU has it (util/xxh3_avx2.h): every stored blob is
// hashed once when packed and again whenever read.
uint64_t xxh3_64(ByteView data);

using Hash128 = std::array<uint8_t, 16>;  // canonical (big-endian) form

// Streaming XXH3-128.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void update(ByteView data);
  void update_zeros(uint64_t count);  // a hole in a sparse file
  Hash128 digest() const;

 private:
  XXH3_state_t* state_;
};

Hash128 xxh3_128(ByteView data);

}  // namespace keel
