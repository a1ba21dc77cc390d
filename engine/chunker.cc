#include "engine/chunker.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <bit>
#include <string>

#include "util/error.h"

namespace keel::engine {

namespace {

// Mask bits are spread over [kMaskLowBit, kMaskHighBit): bit k of the gear
// fingerprint depends on the last k+1 bytes, so spreading the bits widens the
// effective window (FastCDC section 3.2) instead of testing only the newest
// bytes. Bit 63 stays clear so the mask can be shifted left by one for the
// two-bytes-per-step loop.
constexpr unsigned kMaskLowBit = 16;
constexpr unsigned kMaskHighBit = 63;

uint64_t spread_mask(unsigned bits) {
  constexpr unsigned span = kMaskHighBit - kMaskLowBit;
  uint64_t mask = 0;
  for (unsigned i = 0; i < bits; ++i) mask |= uint64_t{1} << (kMaskLowBit + i * span / bits);
  return mask;
}

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Gear entries are HMAC-SHA-256(secret, "keel gear" || be32(counter)), four
// little-endian words per digest: the same on every platform, unguessable
// without the secret.
std::array<uint64_t, 256> derive_gear(ByteView secret) {
  static constexpr char kLabel[] = "keel gear";
  constexpr size_t label_size = sizeof kLabel - 1;
  constexpr size_t words_per_digest = 32 / sizeof(uint64_t);
  static const uint8_t kEmptyKey = 0;  // HMAC() wants a non-null key pointer

  std::array<uint64_t, 256> gear{};
  uint8_t message[label_size + 4];
  std::copy(kLabel, kLabel + label_size, message);
  for (uint32_t counter = 0; counter < gear.size() / words_per_digest; ++counter) {
    for (int i = 0; i < 4; ++i) message[label_size + i] = static_cast<uint8_t>(counter >> (24 - 8 * i));
    uint8_t digest[32];
    unsigned digest_size = 0;
    if (HMAC(EVP_sha256(), secret.empty() ? &kEmptyKey : secret.data(), static_cast<int>(secret.size()),
             message, sizeof message, digest, &digest_size) == nullptr ||
        digest_size != sizeof digest) {
      throw Error(ErrorKind::kFailure, "chunker: deriving the gear table with HMAC-SHA-256 failed");
    }
    for (size_t w = 0; w < words_per_digest; ++w) gear[counter * words_per_digest + w] = load_le64(digest + 8 * w);
  }
  return gear;
}

constexpr size_t kNoCut = SIZE_MAX;

// Rolls the gear fingerprint over data[pos, limit) and returns the chunk
// length at the first position whose fingerprint has all `mask` bits clear,
// or kNoCut (leaving the fingerprint in `fp` for the next range).
//
// Two bytes per step (FastCDC section 3.4): the fingerprint after the first
// byte, shifted left once, is (fp << 2) + (gear[b0] << 1), which is tested
// against mask << 1, so one fingerprint update serves both bytes. Returns the
// same cuts as rolling one byte at a time.
[[gnu::always_inline]] inline size_t scan_range(const uint8_t* data, size_t pos, size_t limit, uint64_t& fp,
                                                uint64_t mask, const uint64_t* gear, const uint64_t* gear_shifted) {
  const uint64_t mask_shifted = mask << 1;
  uint64_t h = fp;
  for (; pos + 2 <= limit; pos += 2) {
    const uint64_t first = gear_shifted[data[pos]];
    const uint64_t second = gear[data[pos + 1]];
    const uint64_t first_step = (h << 2) + first;
    h = first_step + second;
    if (__builtin_expect((first_step & mask_shifted) == 0, 0)) return pos + 1;
    if (__builtin_expect((h & mask) == 0, 0)) return pos + 2;
  }
  if (pos < limit) {
    h = (h << 1) + gear[data[pos]];
    if ((h & mask) == 0) return pos + 1;
  }
  fp = h;
  return kNoCut;
}

}  // namespace

void ChunkerParams::validate() const {
  auto reject = [this](const std::string& why) {
    throw Error(ErrorKind::kUsage, "invalid chunker sizes (min " + std::to_string(min_size) + ", avg " +
                                       std::to_string(avg_size) + ", max " + std::to_string(max_size) + "): " + why);
  };
  if (min_size < 64) reject("min must be at least 64 bytes");
  if (min_size >= avg_size) reject("min must be smaller than avg");
  if (avg_size >= max_size) reject("avg must be smaller than max");
  if (!std::has_single_bit(avg_size)) reject("avg must be a power of two");
}

Chunker::Chunker(const ChunkerParams& params, ByteView secret) : params_(params) {
  params_.validate();
  const unsigned avg_bits = static_cast<unsigned>(std::countr_zero(params_.avg_size));
  // Normalized chunking level 2: 4x less likely to cut before avg, 4x more
  // likely after, which pulls chunk sizes towards avg.
  mask_small_ = spread_mask(avg_bits + 2);
  mask_large_ = spread_mask(avg_bits - 2);
  gear_ = derive_gear(secret);
  for (size_t i = 0; i < gear_.size(); ++i) gear_shifted_[i] = gear_[i] << 1;
}

size_t Chunker::next_cut(ByteView data, bool final) const {
  const size_t size = data.size();
  // Cut points before min_size are never taken, so those bytes are not hashed.
  if (size <= params_.min_size) return final ? size : 0;

  const size_t end = std::min<size_t>(size, params_.max_size);
  const size_t normal_end = std::min<size_t>(end, params_.avg_size);
  const uint8_t* bytes = data.data();
  const uint64_t* gear = gear_.data();
  const uint64_t* gear_shifted = gear_shifted_.data();
  uint64_t fp = 0;

  size_t cut = scan_range(bytes, params_.min_size, normal_end, fp, mask_small_, gear, gear_shifted);
  if (cut != kNoCut) return cut;
  cut = scan_range(bytes, normal_end, end, fp, mask_large_, gear, gear_shifted);
  if (cut != kNoCut) return cut;
  if (end == params_.max_size || final) return end;
  return 0;
}

}  // namespace keel::engine
