// How jobs, their runs and their statuses are shown, by `keel job` and
// `keel scheduler`; and where the job store is.
#pragma once

#include <optional>
#include <string>

#include "catalog/catalog.h"
#include "cli/json.h"
#include "jobs/job.h"
#include "jobs/job_status.h"

namespace keel::cli {

// --jobs, else KEEL_JOBS, else jobs::JobStore::default_path().
std::string jobs_path(const std::string& flag);

// "2026-11-24 02:00:00" in local time, or "-".
std::string fire_text(const std::optional<jobs::TimePoint>& t);
// "met: newest good backup 3h02m00s old, objective 24h00m00s", "MISSED: no
// successful run, objective 1h00m00s", or "not set".
std::string rpo_text(const jobs::JobStatus& status, jobs::TimePoint now);

// JSON objects, into `j`.
void job_json(Json& j, const jobs::Job& job);
void job_run_json(Json& j, const catalog::JobRunRecord& run);
void job_status_json(Json& j, const jobs::JobStatus& status, jobs::TimePoint now);

}  // namespace keel::cli
