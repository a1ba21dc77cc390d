// Where a job stands: its newest runs (from the repository's catalog), its
// next fire, and whether its recovery point objective is met.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "catalog/catalog.h"
#include "jobs/clock.h"
#include "jobs/job.h"

namespace keel::jobs {

struct JobStatus {
  std::string name;
  std::optional<std::chrono::seconds> rpo;  // the objective, if the job has one
  bool running = false;
  std::optional<TimePoint> next_fire;
  // The newest run that ended (refused runs aside: they did not run).
  std::optional<catalog::JobRunRecord> last_run;
  std::optional<catalog::JobRunRecord> last_success;  // the newest with outcome success
  // Copy jobs: the time of the newest snapshot the destination holds for
  // the job's selection (its catalog, as of the last copy); nullopt: none.
  bool copy = false;
  std::optional<int64_t> newest_copy_ns;

  // How old the newest complete restore point is at `now`: since the start
  // of the last successful run (when its snapshot was taken); for a copy
  // job, since the newest snapshot at the destination was taken. nullopt: none.
  std::optional<std::chrono::seconds> rpo_age(TimePoint now) const;
  // nullopt when the job has no RPO; false when there is no successful run.
  std::optional<bool> rpo_met(TimePoint now) const;
};

// The job's status from its catalog's run history (opened read-write, as
// any catalog; no password needed) and, for a copy job, the destination's
// catalog. next_fire is the job's; running is false (the caller knows better).
JobStatus load_job_status(const Job& job);

}  // namespace keel::jobs
