// Whether this machine can do RDMA at all, so callers can disable the data
// plane with a clear message instead of failing deep inside a verbs call.
#pragma once

#include <optional>
#include <string>

namespace keel::targets::rdma {

// Why RDMA is unavailable here (no kernel support, no device), or nullopt.
std::optional<std::string> rdma_unavailable_reason();

}  // namespace keel::targets::rdma
