// Job statuses as Prometheus metrics (text exposition format 0.0.4), for a
// file a node exporter's textfile collector reads or for GET /metrics.
//
// Per job (label job="NAME"):
//   keel_job_last_success_timestamp_seconds  start of the newest successful run
//                                            (when its snapshot was taken); 0: none
//   keel_job_last_run_duration_seconds       of the newest run that ended
//   keel_job_last_run_bytes_added            stored on the target by it
//   keel_job_last_run_outcome{outcome=...}   1 for its outcome, 0 for the others
//   keel_job_rpo_seconds                     the objective (jobs with one)
//   keel_job_rpo_met                         1 if the newest success is within it (copy
//                                            jobs: the newest snapshot at the destination)
//   keel_job_copy_newest_snapshot_timestamp_seconds
//                                            copy jobs: when the newest snapshot the
//                                            destination holds for the selection was taken
//   keel_job_running                         1 while a run goes on
//   keel_job_next_run_timestamp_seconds      the next fire not handled yet
// Series that have no value (no run yet, no RPO) are left out.
#pragma once

#include <string>
#include <vector>

#include "jobs/clock.h"
#include "jobs/job_status.h"

namespace keel::jobs {

// Write it to a file with write_file_atomic (util/fd.h), so a collector
// never reads half of it.
std::string render_metrics(const std::vector<JobStatus>& jobs, TimePoint now);

}  // namespace keel::jobs
