#include <catch2/catch.hpp>

#include "targets/open_target.h"
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

TEST_CASE("--rdma on a machine without RDMA stops with the reason, or opens with a channel", "[rdma]") {
  keel::targets::TargetOptions options;
  options.endpoint = "http://127.0.0.1:1";
  options.access_key_id = "AKIDRDMA";
  options.secret_access_key = "secret";
  options.rdma = "169.254.77.1:7471";
  if (auto reason = rdma_unavailable_reason()) {
    CHECK_THROWS_WITH(keel::targets::open_target("s3://bucket/repo", options),
                      "--rdma 169.254.77.1:7471: RDMA disabled: " + *reason + "; leave out --rdma to use HTTP");
  } else {
    CHECK(keel::targets::open_target("s3://bucket/repo", options) != nullptr);
  }
  options.rdma = "169.254.77.1";
  CHECK_THROWS_WITH(keel::targets::open_target("s3://bucket/repo", options), Catch::Contains("expected HOST:PORT"));
}
