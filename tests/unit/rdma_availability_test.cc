#include <catch2/catch.hpp>

#include "targets/rdma/availability.h"
#include "targets/rdma/verbs_transport.h"
#include "util/error.h"

using namespace keel::targets::rdma;

// Machines without RDMA (CI, this one) must get a clear "disabled" error,
// never a crash; machines with a device get a transport.
TEST_CASE("verbs transport is disabled with a reason where RDMA is missing", "[rdma]") {
  auto reason = rdma_unavailable_reason();
  if (reason) {
    CHECK_THROWS_WITH(make_verbs_transport(), "RDMA disabled: " + *reason);
    CHECK_THROWS_AS(make_verbs_transport(), keel::Error);
  } else {
    CHECK(make_verbs_transport() != nullptr);
  }
}
