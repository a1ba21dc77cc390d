// How much a snapshot, or the whole repository, takes (`keel stats`): from
// the trees and the blob index in the catalog, without reading packs.
#pragma once

#include <cstdint>
#include <vector>

#include "catalog/catalog.h"
#include "engine/repository.h"

namespace keel::engine {

struct SpaceStats {
  uint64_t snapshots = 0;
  uint64_t files = 0;
  uint64_t restore_bytes = 0;  // what a restore writes: the files' sizes, each time they occur
  uint64_t blobs = 0;          // distinct chunks and trees referenced
  uint64_t raw_bytes = 0;      // their plaintext, each once (the deduplicated size)
  uint64_t stored_bytes = 0;   // their compressed and encrypted size in packs
  uint64_t missing_blobs = 0;  // referenced but not in the index (keel check says more)
  // restore_bytes / raw_bytes and raw_bytes / stored_bytes; 0 when undefined.
  double dedup_ratio() const;
  double compression_ratio() const;
};

// One snapshot's figures, counting every blob it references once.
SpaceStats snapshot_stats(Repository& repo, const catalog::SnapshotRecord& snapshot);
// The figures of these snapshots together: a blob two of them share counts once.
SpaceStats combined_stats(Repository& repo, const std::vector<catalog::SnapshotRecord>& snapshots);

}  // namespace keel::engine
