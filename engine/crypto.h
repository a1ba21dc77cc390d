// Sealing and keyed hashing (OpenSSL EVP). A sealed box is
//   nonce (12 random bytes) || AES-256-GCM ciphertext || tag (16 bytes),
// with associated data binding it to its id, so boxes cannot be swapped.
// All functions are thread-safe: OpenSSL contexts are kept per thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

using Key256 = std::array<uint8_t, 32>;

constexpr size_t kNonceSize = 12;
constexpr size_t kTagSize = 16;
constexpr size_t kSealOverhead = kNonceSize + kTagSize;

// Appends the sealed box of `plain` to `out`.
void seal(const Key256& key, ByteView plain, ByteView associated, Bytes& out);
Bytes seal(const Key256& key, ByteView plain, ByteView associated);

// Opens a sealed box into `out` (resized). Throws Error(kIntegrity) with
// `what` in the message if the box is short, altered, or under another key.
void open_sealed(const Key256& key, ByteView box, ByteView associated, Bytes& out, const std::string& what);
Bytes open_sealed(const Key256& key, ByteView box, ByteView associated, const std::string& what);

// HMAC-SHA-256 of `data` under `key`: chunk and tree ids.
Id keyed_id(const Key256& key, ByteView data);
// ids[i] = keyed_id(key, data[i]), several hashed at once where the CPU has
// the SHA extensions (util/hmac_sha256_lanes.h): cheaper per byte than one
// at a time. Backups name the chunks of a batch with it; reads check the
// blobs they open against their ids with it.
void keyed_ids(const Key256& key, std::span<const ByteView> data, std::span<Id> ids);

Key256 random_key();

struct ScryptParams {
  uint64_t n = 1 << 15;
  uint32_t r = 8;
  uint32_t p = 1;
};
// Derives a 32-byte key from a password with scrypt. Throws Error(kUsage)
// unless N is a power of two above 1 and r, p are at least 1.
Key256 derive_key(std::string_view password, ByteView salt, const ScryptParams& params);

}  // namespace keel::engine
