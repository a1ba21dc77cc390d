#include <catch2/catch.hpp>

#include "targets/rdma/token.h"
#include "targets/rdma/token_guard.h"
#include "util/error.h"

using keel::targets::rdma::RemoteRegion;
using keel::targets::rdma::Token;
using keel::targets::rdma::TokenGuard;

TEST_CASE("rdma token round-trips through its text form", "[rdma]") {
  Token t = Token::grant(0x0123456789abcdef, 0x7f0000001000, 8 << 20, 0xdeadbeef);
  std::string text = t.encode();
  CHECK(text.size() == Token::kEncodedSize);
  CHECK(text.rfind("keel-rc-1:0123456789abcdef:00007f0000001000:0000000000800000:deadbeef:", 0) == 0);
  CHECK(Token::parse(text) == t);
  CHECK(Token::grant(1, 2, 3, 4).nonce != Token::grant(1, 2, 3, 4).nonce);
}

TEST_CASE("rdma token parsing is strict", "[rdma]") {
  std::string good = Token::grant(1, 0x1000, 4096, 7).encode();
  auto rejects = [](const std::string& text, const char* why) {
    INFO(text);
    CHECK_THROWS_WITH(Token::parse(text), Catch::Contains(why));
  };
  rejects(good.substr(1), "characters");
  rejects(good + "0", "characters");
  rejects("keel-rc-2" + good.substr(9), "unknown version");
  std::string upper = good;
  upper[10] = 'A';
  rejects(upper, "lowercase hex");
  std::string bad_sep = good;
  bad_sep[26] = ';';
  rejects(bad_sep, "separated");
  rejects(Token{1, 0x1000, 0, 7, {}}.encode(), "length is 0");
  rejects(Token{1, ~0ull, 2, 7, {}}.encode(), "overflows");
}

TEST_CASE("rdma token guard admits only in-range, own-session, fresh tokens", "[rdma]") {
  const RemoteRegion region{0x10000, 0x4000, 42};
  TokenGuard guard(9, region);
  Token ok = Token::grant(9, 0x11000, 0x1000, 42);
  CHECK_NOTHROW(guard.admit(ok, 0x1000));
  CHECK_THROWS_WITH(guard.admit(ok, 0x1000), Catch::Contains("already used"));
  CHECK_THROWS_WITH(guard.admit(Token::grant(8, 0x11000, 0x1000, 42), 0x1000), Catch::Contains("session"));
  CHECK_THROWS_WITH(guard.admit(Token::grant(9, 0x11000, 0x1000, 43), 0x1000), Catch::Contains("rkey"));
  CHECK_THROWS_WITH(guard.admit(Token::grant(9, 0xf000, 0x1001, 42), 0x2000), Catch::Contains("outside"));
  CHECK_THROWS_WITH(guard.admit(Token::grant(9, 0x13001, 0x1000, 42), 0x2000), Catch::Contains("outside"));
  CHECK_NOTHROW(guard.admit(Token::grant(9, 0x10000, 0x4000, 42), 0x4000));
  CHECK_THROWS_WITH(guard.admit(Token::grant(9, 0x10000, 0x2000, 42), 0x1000), Catch::Contains("do not fit"));
}
