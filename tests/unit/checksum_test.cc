// XXH3-128 streams and XXH3-64 (util/checksum.h) against the library's one-shot hashes,
// whichever kernel the CPU runs (util/xxh3_avx2.h where it has AVX2).
#include "util/checksum.h"

#include <xxhash.h>

#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/test_support.h"
#include "util/xxh3_avx2.h"

using keel::Bytes;
using keel::ByteView;
using keel::Hash128;

namespace {

Hash128 reference(ByteView data) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(data.data(), data.size()));
  Hash128 out;
  std::copy(std::begin(c.digest), std::end(c.digest), out.begin());
  return out;
}

}  // namespace

TEST_CASE("an XXH3-128 stream fed in pieces equals the one-shot hash", "[checksum]") {
  std::mt19937 rng(7);
  // Around the 64-byte stripe, the 256-byte buffer and the 1 KiB block, and
  // a few MiB (many blocks through the vector kernel).
  for (size_t size : {0, 1, 63, 64, 65, 240, 241, 255, 256, 257, 1023, 1024, 1025, 4097, 100'000, 3 << 20}) {
    Bytes data = keel::test::random_bytes(size, rng());
    for (size_t piece : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{65536}, size + 1}) {
      if (piece == 1 && size > 100'000) continue;
      keel::Xxh3Stream stream;
      for (size_t at = 0; at < size; at += piece) stream.update(ByteView(data).subspan(at, std::min(piece, size - at)));
      INFO("size " << size << ", pieces of " << piece);
      CHECK(stream.digest() == reference(data));
    }
    CHECK(keel::xxh3_128(data) == reference(data));
  }
}

TEST_CASE("holes hash as the zeros they read as", "[checksum]") {
  keel::Xxh3Stream stream;
  stream.update_zeros(200'000);
  CHECK(stream.digest() == reference(Bytes(200'000)));
}

TEST_CASE("the AVX2 kernel updates the library's state as the library does", "[checksum]") {
  if (!keel::xxh3_avx2::available()) {
    WARN("this CPU has no AVX2: nothing to compare");
    return;
  }
  std::mt19937 rng(11);
  Bytes data = keel::test::random_bytes((1 << 20) + 333, rng());
  XXH3_state_t* state = XXH3_createState();
  REQUIRE(state);
  XXH3_128bits_reset(state);
  keel::xxh3_avx2::update128(state, data.data(), 5000);
  XXH3_128bits_update(state, data.data() + 5000, 100'000);  // the library goes on where it stopped
  keel::xxh3_avx2::update128(state, data.data() + 105'000, data.size() - 105'000);
  XXH128_hash_t got = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  XXH128_hash_t want = XXH3_128bits(data.data(), data.size());
  CHECK(got.low64 == want.low64);
  CHECK(got.high64 == want.high64);
}

TEST_CASE("xxh3_64 equals the library's one-shot hash on either kernel", "[checksum]") {
  std::mt19937 rng(13);
  // Short inputs (no vector kernel), around the 240-byte and 1 KiB edges, and
  // many blocks through the vector kernel.
  for (size_t size : {0, 1, 16, 17, 128, 129, 240, 241, 1023, 1024, 1025, 100'000, (1 << 20) + 77}) {
    Bytes data = keel::test::random_bytes(size, rng());
    INFO("size " << size);
    CHECK(keel::xxh3_64(data) == XXH3_64bits(data.data(), data.size()));
    if (keel::xxh3_avx2::available()) CHECK(keel::xxh3_avx2::hash64(data.data(), data.size()) == XXH3_64bits(data.data(), data.size()));
  }
}
