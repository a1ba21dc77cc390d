#include "util/hmac_sha256_lanes.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/test_support.h"

using keel::Bytes;
using keel::ByteView;
using keel::HmacSha256Lanes;

namespace {

HmacSha256Lanes::Digest reference(ByteView key, ByteView message) {
  static const uint8_t empty = 0;
  HmacSha256Lanes::Digest out{};
  unsigned size = 0;
  HMAC(EVP_sha256(), key.empty() ? &empty : key.data(), static_cast<int>(key.size()),
       message.empty() ? &empty : message.data(), message.size(), out.data(), &size);
  REQUIRE(size == out.size());
  return out;
}

}  // namespace

TEST_CASE("interleaved HMAC-SHA-256 matches OpenSSL for any lengths and counts", "[hmac_lanes]") {
  if (!HmacSha256Lanes::interleaved()) WARN("no SHA extensions: only the OpenSSL path is tested");
  std::mt19937 rng(20);
  // Lengths around the padding edges (55/56 bytes of tail), whole blocks,
  // and messages of very different lengths in one call.
  const std::vector<size_t> lengths = {0,   1,    55,   56,   63,   64,   65,    119,       120,
                                       127, 128,  1000, 4096, 4113, 65536, 1 << 20, (1 << 20) + 3};
  for (size_t key_size : {0, 1, 32, 64, 65, 100}) {
    const Bytes key = keel::test::random_bytes(key_size, rng());
    const HmacSha256Lanes hmac(key);
    for (size_t count : {1, 2, 3, 4, 5, 9, 17}) {
      std::vector<Bytes> messages;
      std::vector<ByteView> views;
      for (size_t i = 0; i < count; ++i) messages.push_back(keel::test::random_bytes(lengths[rng() % lengths.size()], rng()));
      for (const Bytes& m : messages) views.push_back(m);
      std::vector<HmacSha256Lanes::Digest> out(count);
      hmac.digest(views, out);
      for (size_t i = 0; i < count; ++i) {
        INFO("key " << key_size << " bytes, message " << i << " of " << count << ", " << messages[i].size()
                    << " bytes");
        CHECK(out[i] == reference(key, messages[i]));
      }
    }
  }
}

TEST_CASE("interleaved HMAC-SHA-256 of equal messages gives equal digests", "[hmac_lanes]") {
  std::mt19937 rng(21);
  const Bytes key = keel::test::random_bytes(32, rng());
  const Bytes message = keel::test::random_bytes(300000, rng());
  Bytes other = message;
  other[123456] ^= 1;
  const std::vector<ByteView> views = {message, other, message, ByteView(message).first(299999)};
  std::vector<HmacSha256Lanes::Digest> out(views.size());
  HmacSha256Lanes(key).digest(views, out);
  CHECK(out[0] == out[2]);
  CHECK(out[0] != out[1]);
  CHECK(out[0] != out[3]);
  CHECK(out[1] == reference(key, other));
}

TEST_CASE("interleaved HMAC-SHA-256 wants one digest per message", "[hmac_lanes]") {
  const Bytes key(32, 7);
  const Bytes message(10, 1);
  const std::vector<ByteView> views = {message, message};
  std::vector<HmacSha256Lanes::Digest> out(1);
  CHECK_THROWS(HmacSha256Lanes(key).digest(views, out));
}
