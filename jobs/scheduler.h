// The scheduler: runs jobs when their schedules fire (`keel scheduler`).
//
//  - A job fires at the times of its cron schedule (jobs/cron.h), counted
//    from the last fire handled (Job::handled_until_ns), else from when the
//    job was added: a new job waits for its first fire.
//  - A fire missed while the scheduler was down is caught up once when it
//    starts, however many fires were missed; so is a fire that comes while
//    the job's previous run still goes: it runs once that run ends. Runs of
//    one job never overlap (a run held by `keel job run` counts too).
//  - At most max_concurrent runs go at once; due jobs wait their turn,
//    oldest fire first.
//  - Each run is started through a JobLauncher (in production a child
//    process, so a crashing run cannot take the scheduler down).
//  - The job store is reread when another process changes it (checked every
//    poll) and every `refresh`; statuses are published after every change
//    and every `refresh` (an RPO is missed by time passing alone).
//  - Cancel (SIGTERM): running jobs are asked to stop (SIGTERM, so a backup
//    stops at a safe point and the next run reuses what it uploaded), given
//    stop_timeout, then killed.
// Time comes from a Clock, so tests can run a simulated week in
// milliseconds.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jobs/clock.h"
#include "jobs/job.h"
#include "jobs/job_status.h"
#include "jobs/job_store.h"

namespace keel::jobs {

struct FinishedRun {
  std::string job;
  int exit_code = 0;  // as `keel job run` exits (jobs/runner.h)
};

// Starts and stops runs; the scheduler never waits on it.
class JobLauncher {
 public:
  virtual ~JobLauncher() = default;
  // Starts a run of `job`. Throws if it cannot.
  virtual void start(const Job& job) = 0;
  // Runs that ended since the last call.
  virtual std::vector<FinishedRun> reap() = 0;
  // Whether a run of `job` started elsewhere (`keel job run`) holds it.
  virtual bool busy_elsewhere(const Job& job) = 0;
  // Asks every running run to stop (SIGTERM).
  virtual void terminate_all() = 0;
  // Ends every running run now (SIGKILL); reap() reports them.
  virtual void kill_all() = 0;
};

struct SchedulerOptions {
  size_t max_concurrent = 2;
  // Run the jobs due at the start (fires missed included), wait for them and
  // return, instead of running until cancelled.
  bool once = false;
  std::chrono::milliseconds poll{250};  // how often running jobs and the store are checked
  std::chrono::seconds refresh{60};       // reread every job and publish statuses at least this often
  std::chrono::seconds stop_timeout{120};  // after a cancel, before running jobs are killed
};

struct SchedulerEvent {
  enum class Kind {
    kLoaded,   // the job is known (at start, or added since)
    kRemoved,  // the job left the store
    kWaiting,  // the job is due, but max_concurrent runs are going (said once per fire)
    kBusy,     // the job is due, but a run started elsewhere holds it (said once per fire)
    kStarted,
    kStartFailed,  // `message` says why; the fire counts as handled
    kFinished,     // `exit_code` says how the run ended
    kStopping,     // cancelled: `message` says what happens to running jobs
    kKilled,       // the job's run did not stop within stop_timeout
  };
  Kind kind;
  std::string job;                 // empty for kStopping
  std::optional<TimePoint> due;    // kStarted, kWaiting, kBusy: the fire served
  bool missed_while_down = false;  // kStarted: the fire came before the scheduler started
  int exit_code = 0;               // kFinished
  std::chrono::milliseconds duration{0};  // kFinished: how long the run took, by the scheduler's clock
  std::string message;
  JobStatus status;  // the job's status after the event
};

struct SchedulerCallbacks {
  std::function<void(const SchedulerEvent&)> on_event;
  std::function<void(const std::vector<JobStatus>&)> on_status;  // every job, by name
  // A job's run history; default load_job_status.
  std::function<JobStatus(const Job&)> load_status;
};

class Scheduler {
 public:
  Scheduler(JobStore& store, JobLauncher& launcher, Clock& clock, SchedulerOptions options,
            SchedulerCallbacks callbacks);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs until `cancel` is set or, with `once`, until the jobs due at the
  // start have run. Returns the exit code: 0 when cancelled; with `once`, 0
  // if every run succeeded (or none was due), 3 if the worst was partial,
  // 1 otherwise, 130 if cancelled.
  int run(const std::atomic<bool>& cancel);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace keel::jobs
