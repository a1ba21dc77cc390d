#include "targets/rdma/transport.h"

#include "util/error.h"
#include "util/host_port.h"

namespace keel::targets::rdma {

Endpoint Endpoint::parse(const std::string& text) {
  HostPort address = parse_host_port(text, "RDMA address");
  Endpoint endpoint;
  endpoint.host = std::move(address.host);
  endpoint.port = address.port;
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
