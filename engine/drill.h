// A restore drill: proves a restore point can be recovered, against the clock.
//
// The snapshot is restored into a fresh scratch directory (removed afterwards)
// or, verify-only, every byte is fetched, decrypted and checked without
// writing. The drill is measured against two recovery objectives: the RTO
// (how long a recovery may take) and the RPO (how old the newest complete
// restore point may be, i.e. how much recent data a recovery may lose).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/repository.h"
#include "engine/restore.h"
#include "util/id.h"

namespace keel::engine {

struct DrillOptions {
  std::string snapshot = "latest";  // "latest" or an id prefix
  // The drill restores into a new subdirectory of this one (created if
  // needed). Unused, and may be empty, with verify_only.
  std::string scratch_dir;
  bool verify_only = false;
  std::optional<std::chrono::seconds> rto;
  std::optional<std::chrono::seconds> rpo;
  double sample = 1.0;  // fraction of the files to drill, in (0, 1]
  uint64_t seed = 0;    // picks the sample; 0: a random one (reported)
  size_t readers = 0;   // ranged reads in flight; 0: adaptive
  const std::atomic<bool>* cancel = nullptr;
  bool keep_scratch = false;  // leave the restored files in place
  RestoreProgress* progress = nullptr;  // live counters for a display (its clock starts with the restore); may be null
};

struct ThroughputSample {
  double t_seconds = 0;    // since the drill started
  uint64_t bytes_done = 0;  // data bytes restored (or verified) by then
};

struct DrillReport {
  Id snapshot;
  int64_t snapshot_time_ns = 0;  // Unix time the snapshot's backup started
  int64_t started_unix_ns = 0;
  double seconds = 0;              // until every sampled file was restored and checked
  double first_file_seconds = -1;  // until the first file was complete; -1: none was
  uint64_t files = 0;
  uint64_t bytes = 0;   // logical size of the drilled files
  uint64_t errors = 0;  // files that failed
  double throughput_bps = 0;
  std::optional<double> rto_seconds;  // the objectives, when given
  std::optional<double> rpo_seconds;
  // An objective not given counts as met. The RTO is missed when the drill
  // took longer, or when any file failed: that recovery did not recover.
  bool rto_met = true;
  bool rpo_met = true;
  // Age of the newest snapshot without errors when the drill started;
  // infinite if there is none.
  double rpo_seen_seconds = 0;
  bool verify_only = false;
  double sample = 1.0;
  uint64_t seed = 0;
  std::string scratch;        // the directory restored into; empty with verify_only
  bool scratch_kept = false;  // keep_scratch was set and the files are still there
  std::string scratch_error;  // why the scratch directory could not be removed
  std::vector<ThroughputSample> timeline;  // every ~100 ms, the last at `seconds`
  std::vector<RestoreFailure> failures;    // paths as in the snapshot

  bool objectives_met() const { return rto_met && rpo_met; }
};

// Runs the drill. Throws Error(kUsage) for bad options, kNotFound if the
// snapshot does not exist, kInterrupted if cancelled (the scratch directory
// is removed then too, unless kept). Failed files do not throw: they are in
// the report.
DrillReport run_drill(Repository& repo, const DrillOptions& options);

}  // namespace keel::engine
