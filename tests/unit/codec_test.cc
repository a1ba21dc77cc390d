#include <catch2/catch.hpp>

#include "util/codec.h"
#include "util/error.h"

using namespace keel;

TEST_CASE("codec round-trips every field kind", "[codec]") {
  Encoder e;
  e.u8(7);
  e.u32(0xdeadbeef);
  e.u64(0x0123456789abcdefULL);
  e.varint(0);
  e.varint(300);
  e.varint(UINT64_MAX);
  e.svarint(-5);
  e.svarint(INT64_MIN);
  e.str("hello");
  Id id = Id::random();
  e.id(id);

  Decoder d(e.data(), "test record");
  CHECK(d.u8() == 7);
  CHECK(d.u32() == 0xdeadbeef);
  CHECK(d.u64() == 0x0123456789abcdefULL);
  CHECK(d.varint() == 0);
  CHECK(d.varint() == 300);
  CHECK(d.varint() == UINT64_MAX);
  CHECK(d.svarint() == -5);
  CHECK(d.svarint() == INT64_MIN);
  CHECK(d.str() == "hello");
  CHECK(d.id() == id);
  CHECK_NOTHROW(d.expect_done());
}

TEST_CASE("decoder rejects truncated and oversized input", "[codec]") {
  Encoder e;
  e.str("a longer string");
  Bytes data = e.take();
  data.resize(data.size() - 3);
  Decoder d(data, "tree 1234");
  try {
    d.str();
    FAIL("expected an error");
  } catch (const Error& err) {
    CHECK(err.kind() == ErrorKind::kIntegrity);
    CHECK(std::string(err.what()).find("tree 1234") != std::string::npos);
  }

  Bytes bad_varint(11, 0xff);
  Decoder d2(bad_varint, "x");
  CHECK_THROWS_AS(d2.varint(), Error);
}

TEST_CASE("hex round-trips and rejects garbage", "[codec]") {
  Bytes b{0x00, 0x7f, 0xff};
  CHECK(to_hex(b) == "007fff");
  CHECK(from_hex("007FFF") == b);
  CHECK_THROWS_AS(from_hex("0g"), Error);
  CHECK_THROWS_AS(from_hex("abc"), Error);
}
