#include <catch2/catch.hpp>

#include "util/error.h"
#include "util/host_port.h"

using keel::HostPort;
using keel::HostPortRules;
using keel::parse_host_port;

namespace {

std::string error_of(const std::string& text, const HostPortRules& rules = {}) {
  try {
    parse_host_port(text, "listen address", rules);
  } catch (const keel::Error& e) {
    CHECK(e.kind() == keel::ErrorKind::kUsage);
    return e.what();
  }
  FAIL("'" << text << "' was accepted");
  return "";
}

}  // namespace

TEST_CASE("host:port: names, IPv4 and bracketed IPv6", "[host_port]") {
  HostPort a = parse_host_port("127.0.0.1:9000", "x");
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 9000);
  HostPort b = parse_host_port("[::1]:65535", "x");
  CHECK(b.host == "::1");
  CHECK(b.port == 65535);
  HostPort c = parse_host_port("localhost:00080", "x");
  CHECK(c.host == "localhost");
  CHECK(c.port == 80);
  CHECK(keel::format_host_port(b) == "[::1]:65535");
  CHECK(keel::format_host_port(a) == "127.0.0.1:9000");
  CHECK(parse_host_port(keel::format_host_port(b), "x").host == "::1");
}

TEST_CASE("host:port: a default port, and port 0 only where allowed", "[host_port]") {
  HostPortRules with_default;
  with_default.default_port = 443;
  CHECK(parse_host_port("example.com", "x", with_default).port == 443);
  CHECK(parse_host_port("[fe80::1]", "x", with_default).host == "fe80::1");
  CHECK(parse_host_port("[fe80::1]", "x", with_default).port == 443);
  CHECK(parse_host_port("example.com:8443", "x", with_default).port == 8443);
  HostPortRules any_port;
  any_port.allow_port_zero = true;
  CHECK(parse_host_port("0.0.0.0:0", "x", any_port).port == 0);
  CHECK_THAT(error_of("0.0.0.0:0"), Catch::Contains("port 0 is out of range (1-65535)"));
}

TEST_CASE("host:port: clear errors for what is not an address", "[host_port]") {
  CHECK_THAT(error_of("1.2.3.4:65536"), Catch::Contains("port 65536 is out of range"));
  CHECK_THAT(error_of("1.2.3.4:99999999999999999999999"), Catch::Contains("out of range"));
  CHECK_THAT(error_of("1.2.3.4:-1"), Catch::Contains("'-1' is not a number"));
  CHECK_THAT(error_of("1.2.3.4:http"), Catch::Contains("is not a number"));
  CHECK_THAT(error_of("1.2.3.4:"), Catch::Contains("port after ':' is missing"));
  CHECK_THAT(error_of("1.2.3.4"), Catch::Contains("the port is missing"));
  CHECK_THAT(error_of(":9000"), Catch::Contains("the host is missing"));
  CHECK_THAT(error_of("[]:9000"), Catch::Contains("the host is missing"));
  CHECK_THAT(error_of("::1:9000"), Catch::Contains("needs brackets"));
  CHECK_THAT(error_of("[::1:9000"), Catch::Contains("without its ']'"));
  CHECK_THAT(error_of("[::1]9000"), Catch::Contains("expected ':port'"));
  CHECK_THAT(error_of("[localhost]:9000"), Catch::Contains("IPv6 addresses only"));
  CHECK_THAT(error_of("a b:9000"), Catch::Contains("character"));
  CHECK(error_of("x:70000") == "listen address 'x:70000': port 70000 is out of range (1-65535)");
}
