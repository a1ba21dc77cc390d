// The catalog's record of scheduled job runs: history, kept when the index
// is rebuilt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/id.h"

namespace keel::catalog {

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

class JobHistory {
 public:
  virtual ~JobHistory() = default;
  // add_job_run records a run as it starts and returns its id;
  // finish_job_run stores how the run with `run.id` ended.
  virtual int64_t add_job_run(const JobRunRecord& run) = 0;
  virtual void finish_job_run(const JobRunRecord& run) = 0;
  // One job's runs, oldest first; with `newest` > 0 only the newest that many.
  virtual std::vector<JobRunRecord> list_job_runs(std::string_view job, size_t newest = 0) = 0;
};

}  // namespace keel::catalog
