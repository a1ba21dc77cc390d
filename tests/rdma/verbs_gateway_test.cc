// The gateway's RDMA plane on a real device: tokens that reach outside the
// client's registered memory, name another session or are reused are
// refused over verbs as over the loopback transport, and the NIC moves the
// one good token's bytes.
#include <catch2/catch.hpp>

#include "targets/rdma/verbs_transport.h"
#include "tests/rdma/gateway_fixture.h"
#include "tests/rdma/vm_host.h"

namespace {

keel::targets::rdma::SessionOptions vm_sessions() {
  keel::targets::rdma::SessionOptions options;
  options.slot_size = 1 << 20;
  options.slot_count = 2;
  options.timeout = std::chrono::seconds(10);  // TCG-emulated Soft-RoCE is slow
  return options;
}

}  // namespace

TEST_CASE("verbs gateway: tokens outside the buffer, of another session or reused are rejected", "[rdma][gateway]") {
  std::shared_ptr<keel::targets::rdma::Transport> transport = keel::targets::rdma::make_verbs_transport();
  keel::test::InProcessGateway gateway;
  gateway.start_rdma(transport, keel::test::rdma_test_host, 0, vm_sessions());
  const keel::targets::rdma::Endpoint at{keel::test::rdma_test_host, gateway.plane->port()};
  auto session = transport->connect(at, vm_sessions());
  auto other = transport->connect(at, vm_sessions());
  keel::test::check_token_rejections(gateway, *session, *other, vm_sessions());
}
