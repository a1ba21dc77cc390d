// Caps how hard keel drives a target: operations in flight at once, and
// upload and download bandwidth (paced, so a burst waits its turn instead of
// failing). Zero means no limit. Stacked below the retrying decorator, so a
// retried operation queues again like any other.
#pragma once

#include <cstdint>
#include <memory>

#include "targets/target.h"

namespace keel::targets {

struct TargetLimits {
  size_t max_in_flight = 0;               // operations of any kind at once
  uint64_t upload_bytes_per_second = 0;   // put and upload parts
  uint64_t download_bytes_per_second = 0; // ranged reads
  bool any() const { return max_in_flight || upload_bytes_per_second || download_bytes_per_second; }
};

std::unique_ptr<Target> make_limited_target(std::unique_ptr<Target> inner, TargetLimits limits);

}  // namespace keel::targets
