#include "cli/job_report.h"

#include <cstdlib>

#include "cli/format.h"
#include "jobs/job_store.h"

namespace keel::cli {
namespace {

std::optional<int64_t> count(const std::optional<std::chrono::seconds>& value) {
  if (!value) return std::nullopt;
  return value->count();
}

void optional_run(Json& j, std::string_view key, const std::optional<catalog::JobRunRecord>& run) {
  j.key(key);
  if (run) {
    job_run_json(j, *run);
  } else {
    j.null();
  }
}

}  // namespace

std::string jobs_path(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("KEEL_JOBS"); env && *env) return env;
  return jobs::JobStore::default_path();
}

std::string fire_text(const std::optional<jobs::TimePoint>& t) { return t ? local_time(jobs::to_unix_ns(*t)) : "-"; }

std::string rpo_text(const jobs::JobStatus& status, jobs::TimePoint now) {
  std::optional<bool> met = status.rpo_met(now);
  if (!met) return "not set";
  std::optional<std::chrono::seconds> age = status.rpo_age(now);
  std::string seen = age ? std::string(status.copy ? "newest copy " : "newest good backup ") +
                               human_duration(static_cast<double>(age->count())) + " old"
                         : status.copy ? "no snapshot at the destination"
                                       : "no successful run";
  return std::string(*met ? "met: " : "MISSED: ") + seen + ", objective " +
         human_duration(static_cast<double>(status.rpo->count()));
}

void job_json(Json& j, const jobs::Job& job) {
  j.begin_object()
      .field("name", job.name)
      .field("repo", job.repo)
      .field("endpoint", job.endpoint)
      .field("region", job.region)
      .field("aws_profile", job.aws_profile)
      .field("ca_file", job.ca_file)
      .field("virtual_hosted", job.virtual_hosted)
      .field("rdma", job.rdma)
      .field("append_only", job.append_only)
      .field("password_file", job.password_file)
      .field("catalog", job.catalog)
      .field("paths", job.paths)
      .field("excludes", job.excludes)
      .field("stream_command", job.stream_command)
      .field("stream_name", job.stream_name)
      .field("tags", job.tags)
      .field("memory_mib", job.memory_mib)
      .field("schedule", job.schedule)
      .field("time_zone", job.time_zone)
      .field("copy_to", job.copy_to)
      .field("copy_password_file", job.copy_password_file)
      .field("copy_catalog", job.copy_catalog);
  j.key("copy_selection")
      .begin_object()
      .field("hosts", job.copy_selection.hosts)
      .field("tags", job.copy_selection.tags)
      .field("paths", job.copy_selection.paths)
      .field("newer_than_seconds", count(job.copy_newer_than))
      .end_object();
  const engine::RetentionPolicy& r = job.retention;
  j.key("retention")
      .begin_object()
      .field("last", uint64_t{r.last})
      .field("hourly", uint64_t{r.hourly})
      .field("daily", uint64_t{r.daily})
      .field("weekly", uint64_t{r.weekly})
      .field("monthly", uint64_t{r.monthly})
      .field("yearly", uint64_t{r.yearly})
      .field("keep_tags", r.keep_tags)
      .end_object();
  j.field("rpo_seconds", count(job.rpo)).field("before", job.before_hook).field("after", job.after_hook).field("created", iso_time(job.created_ns));
  j.end_object();
}

void job_run_json(Json& j, const catalog::JobRunRecord& run) {
  j.begin_object()
      .field("id", run.id)
      .field("job", run.job)
      .field("started", iso_time(run.started_ns))
      .field("started_unix_ns", run.started_ns)
      .field("ended", run.ended_ns ? iso_time(run.ended_ns) : "")
      .field("seconds", run.ended_ns ? static_cast<double>(run.ended_ns - run.started_ns) / 1e9 : 0.0)
      .field("outcome", catalog::job_outcome_name(run.outcome))
      .field("snapshot", run.snapshot ? run.snapshot->hex() : "")
      .field("files", run.files)
      .field("bytes_read", run.bytes_read)
      .field("bytes_added", run.bytes_added)
      .field("errors", run.errors)
      .field("message", run.message)
      .end_object();
}

void job_status_json(Json& j, const jobs::JobStatus& status, jobs::TimePoint now) {
  j.begin_object()
      .field("running", status.running)
      .field("next_run", status.next_fire ? iso_time(jobs::to_unix_ns(*status.next_fire)) : "");
  optional_run(j, "last_run", status.last_run);
  optional_run(j, "last_success", status.last_success);
  j.field("newest_copy", status.newest_copy_ns ? iso_time(*status.newest_copy_ns) : "");
  j.field("rpo_seconds", count(status.rpo))
      .field("rpo_age_seconds", count(status.rpo_age(now)))
      .field("rpo_met", status.rpo_met(now))
      .end_object();
}

}  // namespace keel::cli
