// The one parser of network addresses given as text: "host:port",
// "[v6]:port", and where a default port applies "host" or "[v6]". Every
// listen address, metrics address, RDMA address and S3 endpoint goes
// through it, so each reports the same clear errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keel {

struct HostPort {
  std::string host;  // a name or an address; an IPv6 address without brackets
  uint16_t port = 0;
};

struct HostPortRules {
  std::optional<uint16_t> default_port;  // used when the text has no port; without it a port is required
  bool allow_port_zero = false;          // 0: "any free port" where the caller listens
};

// Throws Error(kUsage) naming `what` and the text: a missing or empty host, a
// bare IPv6 address (it needs brackets), a port that is not a number or is out
// of range (1-65535, or 0-65535 with allow_port_zero).
HostPort parse_host_port(std::string_view text, std::string_view what, const HostPortRules& rules = {});

// "host:port", "[v6]:port": the form parse_host_port reads back.
std::string format_host_port(const HostPort& address);
// The host as it goes before ":port" or into a URL: an IPv6 address bracketed.
std::string bracketed_host(const std::string& host);

}  // namespace keel
