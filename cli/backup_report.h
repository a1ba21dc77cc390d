// How a backup is shown: its progress, its one-line summary and its
// JSON fields. Shared by `keel backup` and `keel job run`.
#pragma once

#include <string>

#include "cli/json.h"
#include "cli/progress.h"
#include "engine/backup.h"

namespace keel::cli {

// Files, bytes scanned (of the parent's size, an estimate), read and added.
ProgressStatus backup_status(const engine::BackupProgress& progress);
// "snapshot 1a2b3c4d saved: 340 files, 1.2 GiB (...) in 12.00s, 98.0 MB/s"
std::string backup_summary(const catalog::SnapshotRecord& snapshot);
// The fields of `keel backup --json`, into an open object.
void backup_json_fields(Json& j, const engine::BackupResult& result);

}  // namespace keel::cli
