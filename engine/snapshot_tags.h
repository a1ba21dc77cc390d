// Changing a snapshot's tags (`keel tag`). Snapshot records are sealed
// objects named by their id and other hosts' catalogs index them by id, so
// a retagged snapshot is written as a new record (a new id, everything else
// the same) and the old record is then removed, as restic does: every
// catalog sees the change at its next sync as one snapshot added and one
// forgotten. A crash in between leaves both, and tagging again is safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "engine/repository.h"

namespace keel::engine {

struct TagChange {
  std::optional<std::vector<std::string>> set;  // replace all tags (applied first)
  std::vector<std::string> add;
  std::vector<std::string> remove;
};

// The tags after `change`, in order, each once.
std::vector<std::string> changed_tags(const std::vector<std::string>& tags, const TagChange& change);

// Applies `change` to `snapshot` on the target and in the catalog and
// returns the record now in the repository: the same one if the tags do not
// change, else the new one (with a new id).
catalog::SnapshotRecord retag_snapshot(Repository& repo, const catalog::SnapshotRecord& snapshot, const TagChange& change);

}  // namespace keel::engine
