// The address on the RDMA device that keel_rdma_vm_tests run against:
// $KEEL_RDMA_TEST_IP or $RXE_IP, set by its main() before any test runs.
#pragma once

#include <string>

namespace keel::test {

extern std::string rdma_test_host;

}  // namespace keel::test
