// How a restore's progress is shown, by `keel restore` and `keel drill`.
#pragma once

#include "cli/progress.h"
#include "engine/restore.h"

namespace keel::cli {

// Files and bytes restored (or verified) of those selected.
ProgressStatus restore_status(const engine::RestoreProgress& progress);

}  // namespace keel::cli
