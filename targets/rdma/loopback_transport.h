// An in-process software provider of the Transport seam: "RDMA" is memcpy
// between the client's slot pool and the server's, behind the same TokenGuard
// checks as the verbs provider. For unit tests on machines without RDMA.
#pragma once

#include <memory>

#include "targets/rdma/transport.h"

namespace keel::targets::rdma {

// Endpoints name listeners of this transport object only (host is ignored;
// port 0 picks a free one).
std::unique_ptr<Transport> make_loopback_transport();

}  // namespace keel::targets::rdma
