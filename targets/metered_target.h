// Counts what callers ask of the target, per operation: calls, failures,
// payload bytes and the time they took (retries included when stacked above
// the retrying decorator, as open_target does). Reported through
// transfer_stats() as "<operation>_calls", "_errors", "_bytes" and
// "_microseconds" (operations: put, get, head, list, remove, upload_start,
// upload_part, upload_commit, retention), after the inner target's own counters.
#pragma once

#include <memory>

#include "targets/target.h"

namespace keel::targets {

std::unique_ptr<Target> make_metered_target(std::unique_ptr<Target> inner);

}  // namespace keel::targets
