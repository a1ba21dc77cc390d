#include "jobs/job_status.h"

namespace keel::jobs {

std::optional<std::chrono::seconds> JobStatus::rpo_age(TimePoint now) const {
  if (!last_success) return std::nullopt;
  return std::chrono::floor<std::chrono::seconds>(now - from_unix_ns(last_success->started_ns));
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
  return status;
}

}  // namespace keel::jobs
