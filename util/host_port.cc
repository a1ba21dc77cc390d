#include "util/host_port.h"

#include "util/error.h"

namespace keel {
namespace {

[[noreturn]] void fail(std::string_view what, std::string_view text, const std::string& why) {
  throw Error(ErrorKind::kUsage, std::string(what) + " '" + std::string(text) + "': " + why);
}

uint16_t parse_port(std::string_view port, std::string_view what, std::string_view text, const HostPortRules& rules) {
  const char* range = rules.allow_port_zero ? "0-65535" : "1-65535";
  if (port.empty()) fail(what, text, "the port after ':' is missing");
  if (port.find_first_not_of("0123456789") != std::string_view::npos) {
    fail(what, text, "port '" + std::string(port) + "' is not a number");
  }
  // Leading zeros aside, more than five digits cannot be a port; checked before
  // converting so no length of input can overflow.
  const size_t first = std::min(port.find_first_not_of('0'), port.size());
  uint32_t value = 0;
  if (port.size() - first > 5) {
    value = 65536;
  } else {
    for (char c : port.substr(first)) value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535 || (value == 0 && !rules.allow_port_zero)) {
    fail(what, text, "port " + std::string(port) + " is out of range (" + range + ")");
  }
  return static_cast<uint16_t>(value);
}

}  // namespace

HostPort parse_host_port(std::string_view text, std::string_view what, const HostPortRules& rules) {
  HostPort out;
  std::string_view host;
  std::optional<std::string_view> port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) fail(what, text, "'[' without its ']'");
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail(what, text, "expected ':port' after ']'");
      port = rest.substr(1);
    }
    if (!host.empty() && host.find(':') == std::string_view::npos) fail(what, text, "brackets are for IPv6 addresses only");
  } else {
    const size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      fail(what, text, "an IPv6 address needs brackets, e.g. [::1]:9000");
    }
    host = text.substr(0, colon);
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
  }
  const std::string example = rules.default_port ? "HOST or HOST:PORT" : "HOST:PORT, e.g. 127.0.0.1:9000";
  if (host.empty()) fail(what, text, "the host is missing; expected " + example);
  if (host.find_first_of("[]/ \t\r\n@") != std::string_view::npos) fail(what, text, "the host has a character hosts cannot have");
  out.host = std::string(host);
  if (port) {
    out.port = parse_port(*port, what, text, rules);
  } else if (rules.default_port) {
    out.port = *rules.default_port;
  } else {
    fail(what, text, "the port is missing; expected " + example);
  }
  return out;
}

std::string bracketed_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

std::string format_host_port(const HostPort& address) {
  return bracketed_host(address.host) + ":" + std::to_string(address.port);
}

}  // namespace keel
