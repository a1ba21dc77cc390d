// Garbage collection of dedupe buckets: deleting versions, aborting uploads
// and replacing parts leave chunks no record needs. For each repository
// behind a dedupe bucket, engine::prune reclaims them (condemn, grace
// period, delete; repack of mostly dead packs), with every chunk that an
// object version (current, noncurrent, locked or not) or an uploaded part
// of any bucket on that repository references as extra roots, next to the
// repository's own snapshots.
//
// It reads gateway.db while no gateway serves it: the gateway takes the same
// lock (state_lock_path) for as long as it runs, so a PUT can never dedupe
// against a chunk this is about to delete.
#pragma once

#include <string>
#include <vector>

#include "engine/prune.h"
#include "gateway/config.h"
#include "util/file_lock.h"

namespace keel::gateway {

// <state_dir>/gateway.lock: held by a running gateway and by a collection.
std::string state_lock_path(const GatewayConfig& config);
// Takes it; Error(kLocked) naming the state directory while another holds it.
FileLock lock_state(const GatewayConfig& config);

struct RepositoryCollection {
  std::string location;
  std::vector<std::string> buckets;  // the dedupe buckets gateway.db records on it
  uint64_t referenced_chunks = 0;    // chunk references in gateway.db (with repeats)
  engine::PruneResult prune;
};

// One prune per repository of dedupe buckets (configured ones and [dedupe]). Throws
// Error(kLocked) while the gateway runs.
std::vector<RepositoryCollection> collect_garbage(const GatewayConfig& config, const engine::PruneOptions& options);

}  // namespace keel::gateway
