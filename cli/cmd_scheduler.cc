#include <iostream>
#include <memory>
#include <mutex>

#include "cli/commands.h"
#include "cli/number_option.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/parse.h"
#include "jobs/metrics.h"
#include "util/prometheus_server.h"
#include "jobs/process_launcher.h"
#include "jobs/runner.h"
#include "jobs/scheduler.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/file_lock.h"

namespace keel::cli {
namespace {

using jobs::SchedulerEvent;
using Kind = SchedulerEvent::Kind;

// The statuses the scheduler published, for the metrics server's thread.
class StatusBoard {
 public:
  void set(const std::vector<jobs::JobStatus>& statuses) {
    std::lock_guard lock(mu_);
    statuses_ = statuses;
  }
  std::string metrics() const {
    std::lock_guard lock(mu_);
    return jobs::render_metrics(statuses_, std::chrono::system_clock::now());
  }

 private:
  mutable std::mutex mu_;
  std::vector<jobs::JobStatus> statuses_;
};

std::string describe(const SchedulerEvent& e, jobs::TimePoint now) {
  const std::string job = "job " + e.job + ": ";
  const std::string due = e.due ? fire_text(*e.due) : "-";
  switch (e.kind) {
    case Kind::kLoaded:
      return job + "next run " + fire_text(e.status.next_fire) +
             (e.status.next_fire && *e.status.next_fire <= now ? " (due now)" : "") + "; RPO " + rpo_text(e.status, now);
    case Kind::kRemoved:
      return job + "removed from the job store" + (e.status.running ? "; its running run goes on" : "");
    case Kind::kWaiting:
      return job + "due at " + due + ", waiting for a free slot (--max-concurrent)";
    case Kind::kBusy:
      return job + "due at " + due + ", waiting: a run started elsewhere (keel job run) is going";
    case Kind::kStarted:
      return job + "started the run due at " + due +
             (e.missed_while_down ? " (missed while the scheduler was down: caught up once)" : "");
    case Kind::kStartFailed:
      return job + "cannot run: " + e.message;
    case Kind::kFinished: {
      std::string outcome(catalog::job_outcome_name(jobs::outcome_of_exit_code(e.exit_code)));
      std::string message = e.status.last_run && e.status.last_run->outcome != catalog::JobOutcome::kSuccess
                                ? " (" + e.status.last_run->message + ")"
                                : "";
      if (e.exit_code == static_cast<int>(ErrorKind::kLocked)) message = " (another run of the job was going)";
      return job + outcome + " after " + human_duration(static_cast<double>(e.duration.count()) / 1000) + ", exit " +
             std::to_string(e.exit_code) + message + "; next run " + fire_text(e.status.next_fire) + "; RPO " +
             rpo_text(e.status, now);
    }
    case Kind::kStopping:
      return "stopping: " + e.message;
    case Kind::kKilled:
      return job + "did not stop in time: killed (its next run picks up what was uploaded)";
  }
  return job + "?";
}

}  // namespace

int cmd_scheduler(App& app, const Args& args) {
  std::string jobs_file, metrics_file, metrics_listen, stop_timeout = "2m";
  jobs::SchedulerOptions options;
  po::options_description opts(
      "keel scheduler: run jobs on their schedules, in the foreground, until SIGTERM or SIGINT (see docs/jobs.md)");
  opts.add_options()
      ("max-concurrent", count_option(&options.max_concurrent, "--max-concurrent", 1, kMaxReaders)->default_value(std::to_string(options.max_concurrent)),
       "run at most N jobs at once; others wait their turn")
      ("metrics-file", po::value(&metrics_file), "keep Prometheus metrics of every job in FILE (rewritten atomically)")
      ("metrics-listen", po::value(&metrics_listen), "serve Prometheus metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9464)")
      ("once", po::bool_switch(&options.once), "run the jobs due now (missed runs included), wait for them, exit")
      ("stop-timeout", po::value(&stop_timeout)->default_value(stop_timeout),
       "on SIGTERM, give running jobs this long to stop before killing them")
      ("jobs", po::value(&jobs_file), "job store (env KEEL_JOBS; default $XDG_DATA_HOME/keel/jobs.db)");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  if (options.max_concurrent == 0) throw Error(ErrorKind::kUsage, "--max-concurrent must be at least 1");
  options.stop_timeout = parse_duration(stop_timeout, "--stop-timeout");

  jobs::JobStore store(jobs_path(jobs_file));
  std::optional<FileLock> lock = FileLock::try_lock(store.scheduler_lock_path());
  if (!lock) {
    throw Error(ErrorKind::kLocked, "another keel scheduler serves " + store.path() + " (it holds " +
                                        store.scheduler_lock_path() + ")");
  }
  auto log = [&](const std::string& line) {
    if (!app.global.quiet) std::cerr << local_time(jobs::to_unix_ns(std::chrono::system_clock::now())) << " " << line << std::endl;
  };

  StatusBoard board;
  std::unique_ptr<PrometheusServer> server;
  if (!metrics_listen.empty()) {
    server = std::make_unique<PrometheusServer>(metrics_listen, [&] { return board.metrics(); });
  }
  jobs::ProcessLauncher launcher(store, [&](const jobs::Job& job) {
    return std::vector<std::string>{"/proc/self/exe", "job", "run", job.name, "--jobs", store.path(), "--quiet"};
  });
  jobs::SystemClock clock;
  jobs::SchedulerCallbacks callbacks;
  callbacks.on_event = [&](const SchedulerEvent& e) { log(describe(e, clock.now())); };
  bool announced = false;
  callbacks.on_status = [&](const std::vector<jobs::JobStatus>& statuses) {
    board.set(statuses);
    // Announced once the endpoint has every job to show, not before.
    if (server && !announced) log("keel scheduler: metrics at http://" + server->address() + "/metrics");
    announced = true;
    if (metrics_file.empty()) return;
    try {
      write_file_atomic(metrics_file, as_bytes(board.metrics()));
    } catch (const Error& e) {
      log(std::string("cannot write metrics: ") + e.what());  // the schedule matters more
    }
  };
  log("keel scheduler: jobs from " + store.path() + ", at most " + std::to_string(options.max_concurrent) +
      " at once" +
      (options.once ? ", once" : ""));
  jobs::Scheduler scheduler(store, launcher, clock, options, callbacks);
  int code = scheduler.run(App::cancel);
  log(App::cancel.load() ? "keel scheduler: stopped" : "keel scheduler: done");
  return code;
}

}  // namespace keel::cli
