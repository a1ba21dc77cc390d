// One run of a job, in this process: lock, before hook, backup, retention,
// after hook, history.
//
//  1. The job's lock file (JobStore::run_lock_path) is taken without
//     waiting; if another run holds it, this run is refused (recorded,
//     exit code 8). Runs a previous holder left marked "running" (its
//     process was killed) are marked interrupted.
//  2. The run is recorded in the repository's catalog as running.
//  3. The before hook runs (/bin/sh -c, environment below). If it fails, the
//     run fails and nothing is backed up; nor does the after hook run.
//  4. The job's paths are backed up (engine::run_backup through the
//     filesystem agent), tagged job:NAME plus the job's tags. Skipped items
//     make the run partial. A copy job instead copies its selection of the
//     repository's snapshots into its destination (engine::copy_snapshots).
//  5. If the job has a retention policy, engine::forget applies it to the
//     job's snapshots (tag job:NAME), grouped by host and paths.
//  6. The after hook runs whatever the outcome, unless the before hook
//     failed; if it fails, a successful run becomes failed.
//  7. The outcome is recorded.
// Hooks see KEEL_JOB, KEEL_REPO, KEEL_JOB_PATHS (one per line),
// KEEL_JOB_RUN (the run's id) and KEEL_JOB_PHASE (before, after); the after
// hook also KEEL_JOB_OUTCOME and, if one was saved, KEEL_SNAPSHOT. Their
// stdout goes to stderr. Cancellation (SIGINT/SIGTERM) stops the before
// hook (SIGTERM to its process group) or the backup at its next safe point;
// what was uploaded is reused by the next run. The after hook is not
// cancelled: it is where cleanup happens.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "engine/backup.h"
#include "engine/copy.h"
#include "jobs/job.h"

namespace keel::jobs {

struct RunOptions {
  std::string lock_path;                  // JobStore::run_lock_path(job.name)
  std::function<std::string()> password;  // asked when the repository is opened
  const std::atomic<bool>* cancel = nullptr;
  std::function<std::string()> copy_password;  // a copy job's destination's, asked when it is opened
  engine::BackupProgress* progress = nullptr;          // live counters for a display; may be null
  engine::CopyProgress* copy_progress = nullptr;       // the same for a copy job
  std::function<void(const std::string&)> warn;        // skipped items, hook failures; may be empty
};

struct RunResult {
  catalog::JobRunRecord record;  // as recorded
  std::optional<engine::BackupResult> backup;  // when the backup finished
  std::optional<engine::CopyResult> copy;      // when a copy job's copy finished
  size_t snapshots_forgotten = 0;              // by the retention policy
  // The process exit code for this outcome (docs/exit-codes.md): 0
  // success, 3 partial, 8 refused, 130 interrupted, else the failure's.
  int exit_code = 0;
};

// Failures are results, not exceptions, once the run is recorded. Throws
// only if the run cannot be recorded (the catalog cannot be opened).
RunResult run_job(const Job& job, const RunOptions& options);

// The outcome a run's exit code stands for (the reverse of exit_code).
catalog::JobOutcome outcome_of_exit_code(int exit_code);

}  // namespace keel::jobs
