#include "jobs/metrics.h"

#include <functional>
#include <string_view>

#include "util/prometheus_text.h"


namespace keel::jobs {
namespace {

using catalog::JobOutcome;

// Outcomes a run that ended can have (refused runs did not run).
constexpr JobOutcome kRunOutcomes[] = {JobOutcome::kSuccess, JobOutcome::kPartial, JobOutcome::kFailed,
                                       JobOutcome::kInterrupted};

double seconds_of_ns(int64_t ns) { return static_cast<double>(ns) / 1e9; }

class Exposition {
 public:
  // One metric family: its HELP and TYPE, then a sample per job that has one.
  void family(const char* name, const char* help, const std::vector<JobStatus>& jobs,
              const std::function<void(const JobStatus&, const std::string& job_label)>& samples) {
    out_.family(name, "gauge", help);
    name_ = name;
    for (const JobStatus& job : jobs) samples(job, PrometheusText::label("job", job.name));
  }
  void sample(const std::string& labels, double value) { out_.sample(name_, labels, value); }
  std::string take() { return out_.take(); }

 private:
  PrometheusText out_;
  std::string name_;
};

}  // namespace

std::string render_metrics(const std::vector<JobStatus>& jobs, TimePoint now) {
  Exposition e;
  e.family("keel_job_last_success_timestamp_seconds",
           "Unix time the newest successful run started (its snapshot's time); 0 if none.", jobs,
           [&](const JobStatus& j, const std::string& l) {
             e.sample(l, j.last_success ? seconds_of_ns(j.last_success->started_ns) : 0);
           });
  e.family("keel_job_last_run_duration_seconds", "How long the newest run that ended took.", jobs,
           [&](const JobStatus& j, const std::string& l) {
             if (j.last_run) e.sample(l, seconds_of_ns(j.last_run->ended_ns - j.last_run->started_ns));
           });
  e.family("keel_job_last_run_bytes_added", "Bytes the newest run that ended stored on the target.", jobs,
           [&](const JobStatus& j, const std::string& l) {
             if (j.last_run) e.sample(l, static_cast<double>(j.last_run->bytes_added));
           });
  e.family("keel_job_last_run_outcome", "1 for the outcome of the newest run that ended, 0 for the others.", jobs,
           [&](const JobStatus& j, const std::string& l) {
             if (!j.last_run) return;
             for (JobOutcome o : kRunOutcomes) {
               e.sample(l + "," + PrometheusText::label("outcome", catalog::job_outcome_name(o)),
                        j.last_run->outcome == o ? 1 : 0);
             }
           });
  e.family("keel_job_rpo_seconds", "The job's recovery point objective.", jobs,
           [&](const JobStatus& j, const std::string& l) {
             if (j.rpo) e.sample(l, static_cast<double>(j.rpo->count()));
           });
  e.family("keel_job_rpo_met", "1 if the newest successful run is within the recovery point objective.", jobs,
           [&](const JobStatus& j, const std::string& l) {
             if (std::optional<bool> met = j.rpo_met(now)) e.sample(l, *met ? 1 : 0);
           });
  e.family("keel_job_copy_newest_snapshot_timestamp_seconds",
           "Copy jobs: Unix time the newest snapshot the destination holds for the job's selection was taken; 0 if "
           "none.",
           jobs, [&](const JobStatus& j, const std::string& l) {
             if (j.copy) e.sample(l, j.newest_copy_ns ? seconds_of_ns(*j.newest_copy_ns) : 0);
           });
  e.family("keel_job_running", "1 while a run of the job goes on.", jobs,
           [&](const JobStatus& j, const std::string& l) { e.sample(l, j.running ? 1 : 0); });
  e.family("keel_job_next_run_timestamp_seconds", "Unix time of the job's next scheduled run.", jobs,
           [&](const JobStatus& j, const std::string& l) {
             if (j.next_fire) e.sample(l, seconds_of_ns(to_unix_ns(*j.next_fire)));
           });
  return e.take();
}

}  // namespace keel::jobs
