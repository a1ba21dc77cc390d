// How a copy is shown, by `keel copy` and a copy job's `keel job run`: its
// progress, its JSON fields and its summary.
#pragma once

#include <string>

#include "cli/json.h"
#include "cli/progress.h"
#include "engine/copy.h"

namespace keel::cli {

// Snapshots copied, bytes read from the source and sent to the destination.
ProgressStatus copy_status(const engine::CopyProgress& progress);
// The fields of `keel copy --json`, into an open object.
void copy_json_fields(Json& j, const engine::CopyResult& result, bool dry_run);
// "2 snapshots copied, 1 copied before; read 12 chunks (...) from SOURCE, sent ..."
std::string copy_summary(const engine::CopyResult& result, const std::string& source);
// Selected snapshots that were not in the destination before.
size_t snapshots_copied(const engine::CopyResult& result);

}  // namespace keel::cli
