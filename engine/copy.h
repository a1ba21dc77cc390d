// keel copy: snapshots from one repository into another (the 3-2-1 rule).
//
// The two repositories have their own keys, so a chunk's id differs between
// them (ids are keyed, repository.h). A copy reads each chunk's plaintext
// from the source, computes its id in the destination and uploads it, sealed
// under the destination's keys, only if the destination lacks it. Trees are
// rewritten with the destination's ids; chunk boundaries, metadata and file
// checksums stay as they were.
//
// A copied snapshot's id is derived from the source repository and snapshot
// (copy_snapshot_id), so a copy that already exists is skipped and a run
// killed midway is resumed by running it again: the packs it uploaded are
// indexed and reused, the snapshot is written last. A later copy of the
// same host and paths maps unchanged trees and chunks through the newest
// snapshot copied before (the two trees match entry for entry), so it reads
// from the source only what changed.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/repository.h"
#include "engine/snapshot_selection.h"
#include "util/id.h"

namespace keel::engine {

struct CopyOptions {
  SnapshotSelection selection;
  std::vector<Id> snapshots;  // these only (still filtered by `selection`); empty: every selected snapshot
  bool dry_run = false;       // say what would be copied, write nothing
  const std::atomic<bool>* cancel = nullptr;
};

// Updated as the copy runs (for a progress line).
struct CopyProgress {
  std::atomic<uint64_t> snapshots_done{0};
  std::atomic<uint64_t> chunks_read{0};     // read from the source
  std::atomic<uint64_t> bytes_read{0};      // plaintext bytes of those
  std::atomic<uint64_t> chunks_sent{0};     // stored in the destination
  std::atomic<uint64_t> bytes_sent{0};      // sealed bytes of chunks and trees stored
};

struct CopiedSnapshot {
  catalog::SnapshotRecord source;
  Id copy;               // its id in the destination
  bool existed = false;  // copied before: skipped
};

struct CopyResult {
  std::vector<CopiedSnapshot> snapshots;  // oldest first
  uint64_t chunks_read = 0;
  uint64_t bytes_read = 0;
  uint64_t chunks_sent = 0;
  uint64_t trees_sent = 0;
  uint64_t bytes_sent = 0;
  uint64_t chunks_reused = 0;  // found in the destination already (deduped) or mapped by an earlier copy
  uint64_t packs_written = 0;
};

// The id the copy of `snapshot` from `from` has in `to`.
Id copy_snapshot_id(const Repository& from, const Repository& to, const Id& snapshot);

// Copies the selected snapshots of `from` into `to`, oldest first. Throws
// Error(kIntegrity) naming the chunk and file when the source is damaged
// (nothing of that snapshot is then recorded in `to`), Error(kInterrupted)
// when cancelled.
CopyResult copy_snapshots(Repository& from, Repository& to, const CopyOptions& options, CopyProgress& progress);

}  // namespace keel::engine
