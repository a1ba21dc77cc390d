// The real provider of the Transport seam: RC queue pairs over rdma_cm
// (libibverbs, librdmacm). A client connects once per session and announces
// its registered pool in the connect request's private data; the server
// answers with the session id and then RDMA READs and WRITEs within that pool
// on the client's behalf. docs/rdma.md has the wire details.
#pragma once

#include <memory>

#include "targets/rdma/transport.h"

namespace keel::targets::rdma {

// Throws Error(kTargetIo) "RDMA disabled: <reason>" when the machine has no
// RDMA support or device (availability.h), never anything worse.
std::unique_ptr<Transport> make_verbs_transport();

}  // namespace keel::targets::rdma
