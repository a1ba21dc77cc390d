#include "targets/rdma/transport.h"

#include "util/error.h"

namespace keel::targets::rdma {

Endpoint Endpoint::parse(const std::string& text) {
  const size_t colon = text.rfind(':');
  Endpoint endpoint;
  if (colon != std::string::npos) {
    endpoint.host = text.substr(0, colon);
    if (endpoint.host.size() > 2 && endpoint.host.front() == '[' && endpoint.host.back() == ']')
      endpoint.host = endpoint.host.substr(1, endpoint.host.size() - 2);
    const std::string port = text.substr(colon + 1);
    unsigned long value = 0;
    if (!port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos)
      value = std::stoul(port);
    endpoint.port = static_cast<uint16_t>(value <= 65535 ? value : 0);
  }
  if (endpoint.host.empty() || endpoint.host.find_first_of("[]") != std::string::npos || endpoint.port == 0)
    throw Error(ErrorKind::kUsage, "RDMA address '" + text + "': expected HOST:PORT (an address on the RDMA device)");
  return endpoint;
}

Token ClientSession::grant(const Slot& slot, uint64_t length) {
  if (&slot.pool() != &pool())
    throw Error(ErrorKind::kUsage, "RDMA grant: the slot does not come from this session's pool");
  if (length == 0 || length > slot.data().size())
    throw Error(ErrorKind::kUsage, "RDMA grant: " + std::to_string(length) + " bytes do not fit a " +
                                       std::to_string(slot.data().size()) + "-byte slot");
  return Token::grant(session_id(), slot.address(), length, pool().rkey());
}

}  // namespace keel::targets::rdma
