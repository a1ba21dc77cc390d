#include "util/hmac_sha256_lanes.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>

#include "util/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define KEEL_SHA_LANES 1
#endif

namespace keel {

namespace {

constexpr size_t kBlock = 64;
constexpr size_t kMaxLanes = 4;

void openssl_hmac(ByteView key, ByteView message, HmacSha256Lanes::Digest& out) {
  static const uint8_t kEmpty = 0;  // HMAC() wants non-null pointers
  unsigned size = 0;
  if (HMAC(EVP_sha256(), key.empty() ? &kEmpty : key.data(), static_cast<int>(key.size()),
           message.empty() ? &kEmpty : message.data(), message.size(), out.data(), &size) == nullptr ||
      size != out.size()) {
    throw Error(ErrorKind::kFailure, "HMAC-SHA-256 failed (OpenSSL)");
  }
}

#ifdef KEEL_SHA_LANES

bool cpu_has_sha_extensions() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool ssse3 = c & (1u << 9), sse41 = c & (1u << 19);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool sha = b & (1u << 29);
  return ssse3 && sse41 && sha;
}

alignas(16) constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

// A message being hashed: its state (ABEF, CDGH as the SHA extensions keep
// them) and the whole blocks still to compress.
struct Lane {
  __m128i abef, cdgh;
  const uint8_t* data;
  size_t blocks;
};

// Compresses `blocks` blocks of each of N lanes, the lanes' rounds
// interleaved so that their sha256rnds2 chains overlap.
template <size_t N>
[[gnu::target("sha,ssse3,sse4.1"), gnu::noinline]] void compress(Lane* const* lanes, size_t blocks) {
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);  // big-endian words
  __m128i abef[N], cdgh[N];
  for (size_t l = 0; l < N; ++l) {
    abef[l] = lanes[l]->abef;
    cdgh[l] = lanes[l]->cdgh;
  }
  for (size_t b = 0; b < blocks; ++b) {
    __m128i w[N][4], abef0[N], cdgh0[N];
    for (size_t l = 0; l < N; ++l) {
      abef0[l] = abef[l];
      cdgh0[l] = cdgh[l];
      const uint8_t* p = lanes[l]->data + b * kBlock;
      for (size_t i = 0; i < 4; ++i) {
        w[l][i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)), swap);
      }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < 16; ++r) {
      const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kRound + 4 * r));
#pragma GCC unroll 4
      for (size_t l = 0; l < N; ++l) {
        __m128i& m = w[l][r & 3];
        if (r >= 4) {  // the message schedule: W[t] from W[t-16], W[t-15], W[t-7], W[t-2]
          __m128i t = _mm_sha256msg1_epu32(m, w[l][(r + 1) & 3]);
          t = _mm_add_epi32(t, _mm_alignr_epi8(w[l][(r + 3) & 3], w[l][(r + 2) & 3], 4));
          m = _mm_sha256msg2_epu32(t, w[l][(r + 3) & 3]);
        }
        __m128i wk = _mm_add_epi32(m, k);
        cdgh[l] = _mm_sha256rnds2_epu32(cdgh[l], abef[l], wk);
        wk = _mm_shuffle_epi32(wk, 0x0E);
        abef[l] = _mm_sha256rnds2_epu32(abef[l], cdgh[l], wk);
      }
    }
    for (size_t l = 0; l < N; ++l) {
      abef[l] = _mm_add_epi32(abef[l], abef0[l]);
      cdgh[l] = _mm_add_epi32(cdgh[l], cdgh0[l]);
    }
  }
  for (size_t l = 0; l < N; ++l) {
    lanes[l]->abef = abef[l];
    lanes[l]->cdgh = cdgh[l];
    lanes[l]->data += blocks * kBlock;
    lanes[l]->blocks -= blocks;
  }
}

void compress_lanes(Lane* const* lanes, size_t n, size_t blocks) {
  switch (n) {
    case 1: return compress<1>(lanes, blocks);
    case 2: return compress<2>(lanes, blocks);
    case 3: return compress<3>(lanes, blocks);
    default: return compress<4>(lanes, blocks);
  }
}

Lane load_state(const uint32_t* state) {
  return {_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), nullptr, 0};
}

void store_state(const Lane& lane, uint32_t* state) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), lane.abef);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), lane.cdgh);
}

// Standard order (h0..h7) to and from the register order.
void to_register_order(const uint32_t* h, uint32_t* state) {
  const uint32_t order[8] = {h[5], h[4], h[1], h[0], h[7], h[6], h[3], h[2]};
  std::memcpy(state, order, sizeof order);
}

void put_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

void digest_bytes(const Lane& lane, uint8_t* out) {
  uint32_t s[8];
  store_state(lane, s);
  const uint32_t h[8] = {s[3], s[2], s[7], s[6], s[1], s[0], s[5], s[4]};
  for (size_t i = 0; i < 8; ++i) put_be32(out + 4 * i, h[i]);
}

// Pads the last `tail` bytes of a message of `total` bytes (counting what
// was hashed before it) into one or two blocks of `buf`; returns the count.
size_t pad(const uint8_t* tail, size_t tail_size, uint64_t total, uint8_t* buf) {
  const size_t blocks = tail_size + 9 <= kBlock ? 1 : 2;
  std::memset(buf, 0, blocks * kBlock);
  if (tail_size) std::memcpy(buf, tail, tail_size);
  buf[tail_size] = 0x80;
  const uint64_t bits = total * 8;
  for (size_t i = 0; i < 8; ++i) buf[blocks * kBlock - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  return blocks;
}

// Ends a lane whose whole blocks are done: the padded tail of the inner
// hash, then the outer hash of its digest.
void finish(Lane& lane, ByteView message, const uint32_t* outer, HmacSha256Lanes::Digest& out) {
  alignas(16) uint8_t buf[2 * kBlock];
  const size_t tail = message.size() % kBlock;
  lane.data = buf;
  lane.blocks = pad(message.data() + message.size() - tail, tail, kBlock + message.size(), buf);
  Lane* one = &lane;
  compress<1>(&one, lane.blocks);
  uint8_t inner_digest[32];
  digest_bytes(lane, inner_digest);

  Lane out_lane = load_state(outer);
  out_lane.data = buf;
  out_lane.blocks = pad(inner_digest, sizeof inner_digest, kBlock + sizeof inner_digest, buf);
  one = &out_lane;
  compress<1>(&one, out_lane.blocks);
  digest_bytes(out_lane, out.data());
}

#endif  // KEEL_SHA_LANES

}  // namespace

bool HmacSha256Lanes::interleaved() {
#ifdef KEEL_SHA_LANES
  static const bool has = cpu_has_sha_extensions();
  return has;
#else
  return false;
#endif
}

HmacSha256Lanes::HmacSha256Lanes(ByteView key) : key_(key.begin(), key.end()), inner_{}, outer_{} {
#ifdef KEEL_SHA_LANES
  if (!interleaved()) return;
  uint8_t block_key[kBlock] = {};
  if (key.size() > kBlock) {
    SHA256(key.data(), key.size(), block_key);
  } else if (!key.empty()) {
    std::memcpy(block_key, key.data(), key.size());
  }
  uint32_t initial[8];
  to_register_order(kInitial, initial);
  for (auto [pad_byte, state] : {std::pair<uint8_t, uint32_t*>{0x36, inner_}, {0x5c, outer_}}) {
    uint8_t block[kBlock];
    for (size_t i = 0; i < kBlock; ++i) block[i] = block_key[i] ^ pad_byte;
    Lane lane = load_state(initial);
    lane.data = block;
    lane.blocks = 1;
    Lane* one = &lane;
    compress<1>(&one, 1);
    store_state(lane, state);
  }
#endif
}

void HmacSha256Lanes::digest(std::span<const ByteView> messages, std::span<Digest> out) const {
  if (out.size() != messages.size()) throw Error(ErrorKind::kFailure, "HmacSha256Lanes: one digest per message");
#ifdef KEEL_SHA_LANES
  if (interleaved()) {
    // Up to four messages in flight; whenever one has no whole block left
    // it is finished alone and the next message takes its lane.
    Lane lanes[kMaxLanes];
    size_t which[kMaxLanes];
    size_t active = 0, next = 0;
    for (;;) {
      while (active < kMaxLanes && next < messages.size()) {
        lanes[active] = load_state(inner_);
        lanes[active].data = messages[next].data();
        lanes[active].blocks = messages[next].size() / kBlock;
        which[active++] = next++;
      }
      if (active == 0) break;
      size_t common = SIZE_MAX;
      for (size_t l = 0; l < active; ++l) common = std::min(common, lanes[l].blocks);
      if (common) {
        Lane* ptrs[kMaxLanes];
        for (size_t l = 0; l < active; ++l) ptrs[l] = &lanes[l];
        compress_lanes(ptrs, active, common);
      }
      for (size_t l = 0; l < active;) {
        if (lanes[l].blocks) {
          ++l;
          continue;
        }
        finish(lanes[l], messages[which[l]], outer_, out[which[l]]);
        --active;
        lanes[l] = lanes[active];
        which[l] = which[active];
      }
    }
    return;
  }
#endif
  for (size_t i = 0; i < messages.size(); ++i) openssl_hmac(key_, messages[i], out[i]);
}

}  // namespace keel
