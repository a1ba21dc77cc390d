#include "jobs/job_status.h"

#include <algorithm>

namespace keel::jobs {

std::optional<std::chrono::seconds> JobStatus::rpo_age(TimePoint now) const {
  std::optional<int64_t> point = copy ? newest_copy_ns
                                      : last_success ? std::optional(last_success->started_ns) : std::nullopt;
  if (!point) return std::nullopt;
  return std::chrono::floor<std::chrono::seconds>(now - from_unix_ns(*point));
}

std::optional<bool> JobStatus::rpo_met(TimePoint now) const {
  if (!rpo) return std::nullopt;
  std::optional<std::chrono::seconds> age = rpo_age(now);
  return age && *age <= *rpo;
}

JobStatus load_job_status(const Job& job) {
  JobStatus status;
  status.name = job.name;
  status.rpo = job.rpo;
  status.next_fire = job.next_fire();
  auto history = catalog::Catalog::open(job.catalog);
  for (catalog::JobRunRecord& run : history->list_job_runs(job.name)) {
    using catalog::JobOutcome;
    if (run.outcome == JobOutcome::kRunning || run.outcome == JobOutcome::kRefused) continue;
    if (run.outcome == JobOutcome::kSuccess) status.last_success = run;
    status.last_run = std::move(run);
  }
  if (job.is_copy()) {
    status.copy = true;
    for (const catalog::SnapshotRecord& s : catalog::Catalog::open(job.copy_catalog)->list_snapshots()) {
      if (job.copy_selection.matches(s)) status.newest_copy_ns = std::max(status.newest_copy_ns.value_or(s.time_ns), s.time_ns);
    }
  }
  return status;
}

}  // namespace keel::jobs
