// keel repair: confines damage found on the target. Damaged objects (a
// snapshot record, a key slot, a pack) are moved aside to damaged/<key> on
// the target, the intact blobs of a damaged pack are first copied into new
// packs, the catalog is rebuilt from what is left, and what is lost is
// listed by snapshot and path. See docs/maintenance.md.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "engine/check.h"
#include "engine/repository.h"

namespace keel::engine {

struct RepairOptions {
  bool dry_run = false;  // only report what would be moved and what is lost
  const std::atomic<bool>* cancel = nullptr;
};

struct RepairResult {
  std::vector<DamagedObject> damaged;  // moved aside (dry run: to be moved)
  uint64_t blobs_salvaged = 0;         // intact blobs copied out of damaged packs
  uint64_t blobs_lost = 0;             // referenced blobs with no intact copy
  // "<snapshot short id>:<path>" of each file whose data is lost, or
  // ":<path>/ (directory listing)" where a tree is lost (all under it),
  // or "<snapshot>:/ (snapshot record)" for a damaged snapshot record.
  std::vector<std::string> lost;
};

// The key a damaged object is moved to.
std::string damaged_key(const std::string& key);

RepairResult repair(Repository& repo, const RepairOptions& options);

}  // namespace keel::engine
