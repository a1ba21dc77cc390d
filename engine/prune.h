// Prune: reclaims the space of data no snapshot needs any more, in two
// phases, so that backups running at the same time never lose data and need
// no lock (docs/maintenance.md has the reasoning):
//
// 1. Mark: sync the catalog with the target (snapshots and packs of other
//    hosts), then mark every blob reachable from a snapshot (LiveBlobs) or
//    named by PruneOptions::extra_roots.
// 2. Condemn: packs without a live blob are condemned: recorded on the
//    target (condemned/<id>, see condemnation.h) and in the catalog.
//    Backups that start later no longer dedupe against them. Packs whose
//    live share fell under the repack threshold are condemned as well, and
//    their live blobs copied (sealed bytes as they are, checked on the way)
//    into new packs that take over their index entries.
// 3. Delete: a condemned pack goes once the grace period has passed since it
//    was condemned, every backup that was running then has ended, and it is
//    still unused after marking again; one that a backup used meanwhile is
//    taken back into use (resurrected). "Since it was condemned" and "running
//    then" are judged by the store's clock too (Condemnation::grace_from,
//    ran_when_written): a record's own date and list are not believed.
//
// A maintenance lock (locks/, lease.h) keeps a second prune away.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/lease.h"
#include "engine/repository.h"

namespace keel::engine {

// Where a running prune is, for progress displays; written by the prune,
// read from any thread.
enum class PrunePhase { kMark, kRepack, kSettle };
const char* prune_phase_name(PrunePhase phase);  // "mark", "repack", "settle"

struct PruneProgress {
  std::atomic<PrunePhase> phase{PrunePhase::kMark};
  std::atomic<uint64_t> snapshots_marked{0}, snapshots_total{0};
  std::atomic<uint64_t> bytes_repacked{0}, bytes_to_repack{0};  // live bytes of the packs to repack
  std::atomic<uint64_t> packs_settled{0}, packs_to_settle{0};   // condemned packs judged (deleted, waiting...)
};

// Calls `mark` for every chunk in use outside snapshots.
using ChunkRoots = std::function<void(const std::function<void(const Id& chunk)>& mark)>;

struct PruneOptions {
  std::chrono::seconds grace{24 * 3600};  // from condemnation to deletion; 0: both in one run
  double repack_threshold = 0.5;          // repack packs whose live share is below this; 0: never
  uint64_t max_repack = std::numeric_limits<uint64_t>::max();  // bytes of packs repacked in one run
  bool dry_run = false;                   // decide and report, change nothing
  UnixClock clock = unix_now;             // tests move time
  // Change-log entries older than this are compacted (engine/change_log.h):
  // a catalog that has not synced since then syncs in full once.
  std::chrono::seconds log_retention{24 * 3600};
  const std::atomic<bool>* cancel = nullptr;
  PruneProgress* progress = nullptr;  // updated as the run goes, when given
  // Chunks that something other than snapshots still needs (the gateway's
  // objects in dedupe buckets): live like a snapshot's. Asked when marking
  // and again before deleting, so chunks referenced meanwhile stay.
  ChunkRoots extra_roots;
};

enum class PackAction {
  kCondemn,    // no live blob: condemned now
  kRepack,     // live share under the threshold: live blobs copied, pack condemned
  kDelete,     // condemned, grace passed, still unused: deleted
  kWait,       // condemned, still waiting for its grace period, running backups or its Object Lock
  kResurrect,  // condemned, but a snapshot uses it again: back in use
};

const char* pack_action_name(PackAction action);  // "condemn", "repack", ...

struct PackDecision {
  Id pack;
  PackAction action = PackAction::kCondemn;
  uint64_t size = 0;
  uint64_t live_bytes = 0;        // stored bytes of its blobs that snapshots use
  int64_t condemned_unix = 0;     // kDelete, kWait, kResurrect: when it was condemned
  int64_t deletable_unix = 0;     // kWait: when the grace period (or the pack's Object Lock) ends
  size_t waiting_for_backups = 0; // kWait: backups running since it was condemned
  std::optional<Id> condemnation; // kDelete, kWait, kResurrect: its record on the target (condemned/<id>)
};

// A condemnation record on the target as prune judged it (condemnation.h):
// the date it claims, when the store wrote it, and where its grace starts.
struct CondemnationSeen {
  Id id;
  std::string host;
  int64_t claimed_unix = 0;
  int64_t modified_unix = 0;
  int64_t grace_from_unix = 0;
  size_t packs = 0;
  size_t waiting_for_backups = 0;  // running backups its packs wait for
};

struct PruneResult {
  bool dry_run = false;
  uint64_t snapshots = 0;
  uint64_t blobs = 0;                 // indexed
  uint64_t live_blobs = 0;
  uint64_t trees_walked = 0;
  uint64_t unindexed_references = 0;  // chunks snapshots use that no pack in the index holds
  uint64_t packs = 0;                 // in the index when marking
  uint64_t pack_bytes = 0;
  uint64_t packs_condemned = 0, packs_repacked = 0, packs_deleted = 0, packs_waiting = 0, packs_resurrected = 0;
  uint64_t packs_written = 0;         // new packs holding repacked blobs
  uint64_t bytes_repacked = 0;        // live bytes copied
  uint64_t bytes_written = 0;         // size of the new packs
  uint64_t bytes_deleted = 0;
  uint64_t bytes_waiting = 0;         // condemned, not yet deleted
  size_t running_backups = 0;         // seen before deleting
  size_t stale_uploads_removed = 0;
  // Catalog copies beyond each catalog's newest few (those of append-only
  // hosts, which remove none themselves).
  size_t catalog_copies_removed = 0;
  // Object Lock repositories: packs in use whose lock was extended, and
  // condemned packs kept because their lock has not ended (waiting too).
  uint64_t packs_lock_extended = 0, packs_locked = 0;
  uint64_t mark_memory_bytes = 0;     // what marking held: LiveBlobs::memory_bytes
  double seconds = 0;
  std::vector<PackDecision> decisions;  // every pack acted on or waiting
  std::vector<CondemnationSeen> condemnations;  // every record on the target, as listed before deleting
  std::vector<std::string> warnings;    // e.g. a damaged blob that could not be repacked
};

// Throws Error(kLocked) if another maintenance run holds the lock.
// Throws Error(kUsage) when the repository declares external roots (below)
// and `options` brings none: such a prune would delete chunks in use.
PruneResult prune(Repository& repo, const PruneOptions& options);

// Marks the repository as holding chunks that something other than its
// snapshots references (`holder`, e.g. a keel gateway's dedupe buckets), so
// that a plain `keel prune`, which sees only snapshots, refuses to run on it.
// The mark is the object "external-roots" (plain text naming the holder);
// writing it again is harmless.
void declare_external_roots(Repository& repo, const std::string& holder);

}  // namespace keel::engine
