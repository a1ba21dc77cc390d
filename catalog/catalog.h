// The local SQLite catalog of one repository: the index of what is on the
// target (packs, blobs, trees, snapshots) plus operational history. WAL mode,
// numbered migrations. Everything but history can be rebuilt from the target.
//
// The catalog knows nothing of the engine's formats: trees are opaque bodies,
// ids are keel::Id. One Catalog object may be shared by threads; calls are
// serialized internally.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/bytes.h"
#include "util/id.h"

namespace keel::catalog {

enum class BlobType : uint8_t { kData = 0, kTree = 1 };

struct PackRecord {
  Id id;
  uint64_t size = 0;        // bytes of the whole pack object
  Bytes xxh3_128;           // 16 bytes: XXH3-128 of the whole pack object
  int64_t created_unix = 0; // seconds
  // When a prune condemned the pack (it will be deleted once its grace
  // period has passed); empty while it is in use. See docs/maintenance.md.
  std::optional<int64_t> condemned_unix;
};

// A blob's place in its pack. `xxh3` covers the stored (sealed) bytes, so a
// scrub can find bit rot without keys.
struct BlobRecord {
  Id id;
  BlobType type = BlobType::kData;
  uint64_t offset = 0;
  uint32_t stored_length = 0;
  uint32_t raw_length = 0;
  uint64_t xxh3 = 0;
};

struct BlobLocation {
  Id pack;
  BlobRecord blob;
};

struct SnapshotStats {
  uint64_t files = 0;
  uint64_t dirs = 0;
  uint64_t bytes = 0;          // logical bytes of the files in the snapshot
  uint64_t bytes_read = 0;     // bytes read from the source (changed files)
  uint64_t bytes_added = 0;    // bytes stored on the target by this backup
  uint64_t chunks_added = 0;
  uint64_t errors = 0;         // items skipped
  int64_t duration_ms = 0;
};

struct SnapshotRecord {
  Id id;
  int64_t time_ns = 0;  // Unix time the backup started
  std::string host;
  std::string username;
  std::vector<std::string> paths;
  std::vector<std::string> tags;
  std::optional<Id> parent;
  Id root;  // root tree
  SnapshotStats stats;
};

// One restore drill (`keel drill`): history, kept when the index is rebuilt.
struct DrillRecord {
  int64_t id = 0;                  // assigned by add_drill
  int64_t started_ns = 0;          // Unix time the drill started
  Id snapshot;
  double seconds = 0;              // from start until the last byte was restored and checked
  double first_file_seconds = -1;  // until the first file was complete; -1: none was
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;             // files that failed
  std::optional<double> rto_seconds;  // the objectives, when given
  std::optional<double> rpo_seconds;
  bool rto_met = true;
  bool rpo_met = true;
  double rpo_seen_seconds = 0;     // age of the newest complete snapshot (may be infinite: none)
  bool verify_only = false;
  double sample = 1.0;             // fraction of the files drilled
  uint64_t seed = 0;               // the sample's seed
  std::string report_json;         // the whole report, as `keel drill --json` printed it
};

// How a run of a scheduled job ended. kRunning until it ends (or for good,
// if its process died without a word: the job's next run marks such runs
// kInterrupted).
enum class JobOutcome {
  kRunning,
  kSuccess,
  kPartial,      // a snapshot was saved, but some items could not be read
  kFailed,
  kRefused,      // another run of the job was still going
  kInterrupted,  // SIGINT/SIGTERM; the next run reuses what was uploaded
};
std::string_view job_outcome_name(JobOutcome outcome);  // "success", "partial", ...
// Throws Error(kIntegrity) for a name job_outcome_name does not give.
JobOutcome parse_job_outcome(std::string_view name);

// One run of a job (`keel job run`, `keel scheduler`): history, kept when the
// index is rebuilt.
struct JobRunRecord {
  int64_t id = 0;  // assigned by add_job_run
  std::string job;
  int64_t started_ns = 0;  // Unix time
  int64_t ended_ns = 0;    // 0 while running
  JobOutcome outcome = JobOutcome::kRunning;
  std::optional<Id> snapshot;  // the snapshot the run saved, if it got that far
  uint64_t files = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_added = 0;
  uint64_t errors = 0;  // items skipped
  std::string message;  // why it failed, was refused or interrupted
};

class Catalog {
 public:
  // Opens or creates the database at `path` (and its directory) and applies
  // pending migrations. Throws Error(kTargetIo) if it cannot.
  static std::unique_ptr<Catalog> open(const std::string& path);
  virtual ~Catalog() = default;

  virtual int schema_version() = 0;

  // Small key/value facts: repository id, target description.
  virtual std::optional<std::string> get_meta(std::string_view key) = 0;
  virtual void set_meta(std::string_view key, std::string_view value) = 0;

  // A pack and all its blobs, in one transaction. A blob already indexed in
  // another pack keeps its first location, unless that pack is condemned and
  // this one is not: then the blob moves here (a repacked copy, or a backup
  // that stored it again, takes over from a pack on its way out).
  virtual void add_pack(const PackRecord& pack, std::span<const BlobRecord> blobs) = 0;
  virtual bool has_pack(const Id& pack) = 0;
  virtual std::vector<PackRecord> list_packs() = 0;
  // Condemns a pack (since the given time) or, with nullopt, returns it to use.
  virtual void set_condemned(const Id& pack, std::optional<int64_t> since_unix) = 0;
  virtual std::optional<BlobLocation> find_blob(const Id& blob) = 0;
  // find_blob for many, in one read transaction: a consistent view, and no
  // file-lock round trip per blob (restore planning looks up every chunk).
  virtual std::vector<std::optional<BlobLocation>> find_blobs(std::span<const Id> blobs) = 0;
  virtual std::vector<BlobRecord> blobs_in_pack(const Id& pack) = 0;
  // Every blob a backup may dedupe against (those in condemned packs are
  // left out): loads the engine's dedupe index. Other threads' calls wait
  // until it returns; `fn` itself may call this catalog.
  virtual void for_each_usable_blob(const std::function<void(const Id&, BlobType)>& fn) = 0;
  // Every indexed blob with its location, in id order (prune's scan). Other
  // threads' calls wait until it returns; `fn` itself may call this catalog.
  virtual void for_each_blob_location(const std::function<void(const BlobLocation&)>& fn) = 0;
  virtual uint64_t blob_count() = 0;
  // Removes the pack, the blobs it indexes and the cached bodies of its trees.
  virtual void remove_pack(const Id& pack) = 0;

  // Directory trees as the engine serialized them (plaintext), so listing
  // and restore planning need no round trip to the target.
  virtual void put_tree(const Id& id, ByteView body) = 0;
  virtual std::optional<Bytes> get_tree(const Id& id) = 0;

  virtual void add_snapshot(const SnapshotRecord& snapshot) = 0;  // replaces one with the same id
  virtual std::optional<SnapshotRecord> get_snapshot(const Id& id) = 0;
  virtual std::vector<SnapshotRecord> list_snapshots() = 0;  // oldest first
  virtual void remove_snapshot(const Id& id) = 0;

  // Drops packs, blobs, trees and snapshots (not history: drills, job runs),
  // before a rebuild.
  virtual void clear_index() = 0;

  // Bounds this connection's page cache (default 64 MiB). Scans that touch
  // every page once, as prune's, gain nothing from a large one, and it would
  // make their memory grow with the repository.
  virtual void limit_cache(uint64_t bytes) = 0;

  // Drill history. add_drill returns the new record's id.
  virtual int64_t add_drill(const DrillRecord& drill) = 0;
  virtual std::vector<DrillRecord> list_drills() = 0;  // oldest first

  // A consistent copy of the whole database in a new file at `path` (which
  // must not exist), taken while other calls go on.
  virtual void export_to(const std::string& path) = 0;
  // Adds the history (drills, ...) recorded in the catalog file at `path`
  // that this one lacks; returns the records added. The file may be of an
  // older schema, not a newer one.
  virtual size_t import_history(const std::string& path) = 0;
  // Job run history. add_job_run records a run as it starts and returns its
  // id; finish_job_run stores how the run with `run.id` ended.
  virtual int64_t add_job_run(const JobRunRecord& run) = 0;
  virtual void finish_job_run(const JobRunRecord& run) = 0;
  // One job's runs, oldest first; with `newest` > 0 only the newest that many.
  virtual std::vector<JobRunRecord> list_job_runs(std::string_view job, size_t newest = 0) = 0;

  // Runs `fn` inside one transaction (committed if it returns, rolled back
  // if it throws). Calls on this catalog from `fn` join the transaction; a
  // nested transaction (or add_pack) that throws undoes only its own part.
  // Other threads' calls wait until it ends, so `fn` must not wait on them.
  virtual void transaction(const std::function<void()>& fn) = 0;
};

}  // namespace keel::catalog
