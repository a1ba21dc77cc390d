#include "jobs/scheduler.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "jobs/runner.h"
#include "util/error.h"

namespace keel::jobs {
namespace {

using Kind = SchedulerEvent::Kind;

// While stopping, running jobs are checked at least this often.
constexpr std::chrono::milliseconds kStopPoll{100};
// Killed runs are reaped within this many polls, or given up on.
constexpr int kKillPolls = 100;

struct Entry {
  Job job;
  JobStatus status;
  TimePoint next_fire = TimePoint::max();  // the first fire not handled; max: never (bad schedule)
  bool running = false;
  TimePoint started;
  bool removed = false;  // left the store while running: dropped once reaped
  std::optional<TimePoint> announced;  // the fire kWaiting or kBusy was said for
};

}  // namespace

struct Scheduler::State {
  JobStore& store;
  JobLauncher& launcher;
  Clock& clock;
  SchedulerOptions options;
  SchedulerCallbacks callbacks;
  std::map<std::string, Entry> entries;
  TimePoint started_at;
  size_t running = 0;
  bool statuses_changed = false;
  int worst_outcome_code = 0;  // for `once`: 0, 3 (partial) or 1

  State(JobStore& s, JobLauncher& l, Clock& c, SchedulerOptions o, SchedulerCallbacks cb)
      : store(s), launcher(l), clock(c), options(o), callbacks(std::move(cb)) {
    if (!callbacks.load_status) callbacks.load_status = load_job_status;
  }

  int run(const std::atomic<bool>& cancel) {
    started_at = clock.now();
    store.changed();  // the first call always says so; reload() reads it all anyway
    reload();
    publish();
    TimePoint next_refresh = started_at + options.refresh;
    while (true) {
      TimePoint now = clock.now();
      reap(now);
      if (cancel.load()) break;
      if (now >= next_refresh || store.changed()) {
        reload();
        statuses_changed = true;
        if (now >= next_refresh) next_refresh = now + options.refresh;
      }
      start_due(now);
      if (statuses_changed) publish();
      if (options.once && running == 0 && !due_for_once()) break;

      TimePoint wake = std::min(next_refresh, now + options.poll);
      for (const auto& [name, e] : entries) {
        if (!e.running && e.next_fire > now) wake = std::min(wake, e.next_fire);
      }
      clock.sleep_until(wake, cancel);
    }
    if (cancel.load()) stop();
    publish();
    if (options.once) return cancel.load() ? static_cast<int>(ErrorKind::kInterrupted) : worst_outcome_code;
    return 0;
  }

  void reload() {
    std::vector<Job> jobs = store.list();
    std::set<std::string> listed;
    for (Job& job : jobs) {
      listed.insert(job.name);
      auto it = entries.find(job.name);
      // A job removed and added again under its name is a new job.
      if (it != entries.end() && it->second.job.created_ns != job.created_ns && !it->second.running) {
        entries.erase(it);
        it = entries.end();
      }
      if (it == entries.end()) {
        Entry& e = entries[job.name];
        e.job = std::move(job);
        e.status = load_status(e.job, e.status);
        update_next_fire(e);
        emit(Kind::kLoaded, e);
      } else {
        Entry& e = it->second;
        e.job = std::move(job);
        e.removed = false;
        e.status.rpo = e.job.rpo;
        update_next_fire(e);
      }
    }
    for (auto it = entries.begin(); it != entries.end();) {
      if (listed.count(it->first) || it->second.removed) {
        ++it;
        continue;
      }
      emit(Kind::kRemoved, it->second);
      if (it->second.running) {
        it->second.removed = true;
        ++it;
      } else {
        it = entries.erase(it);
      }
    }
  }

  void update_next_fire(Entry& e) {
    try {
      e.next_fire = e.job.next_fire();
    } catch (const Error& err) {
      e.next_fire = TimePoint::max();
      emit(Kind::kStartFailed, e, [&](SchedulerEvent& ev) { ev.message = err.what(); });
    }
    e.status.next_fire = e.next_fire == TimePoint::max() ? std::nullopt : std::optional(e.next_fire);
  }

  JobStatus load_status(const Job& job, const JobStatus& fallback) {
    JobStatus status = fallback;
    try {
      status = callbacks.load_status(job);
    } catch (const std::exception&) {
      // An unreadable catalog must not stop the schedule: keep what we knew.
      status.name = job.name;
      status.rpo = job.rpo;
    }
    return status;
  }

  bool due(const Entry& e, TimePoint now) const {
    return !e.running && !e.removed && e.next_fire <= now && (!options.once || e.next_fire <= started_at);
  }

  bool due_for_once() const {
    return std::any_of(entries.begin(), entries.end(), [&](const auto& kv) { return due(kv.second, started_at); });
  }

  void start_due(TimePoint now) {
    std::vector<Entry*> due_now;
    for (auto& [name, e] : entries) {
      if (due(e, now)) due_now.push_back(&e);
    }
    std::sort(due_now.begin(), due_now.end(), [](const Entry* a, const Entry* b) {
      return std::tie(a->next_fire, a->job.name) < std::tie(b->next_fire, b->job.name);
    });
    for (Entry* e : due_now) {
      Kind blocked = Kind::kLoaded;
      if (launcher.busy_elsewhere(e->job)) {
        blocked = Kind::kBusy;
      } else if (running >= options.max_concurrent) {
        blocked = Kind::kWaiting;
      }
      if (blocked == Kind::kLoaded) {
        start(*e, now);
      } else if (e->announced != e->next_fire) {
        e->announced = e->next_fire;
        emit(blocked, *e, [&](SchedulerEvent& ev) { ev.due = e->next_fire; });
      }
    }
  }

  void start(Entry& e, TimePoint now) {
    const TimePoint due_at = e.next_fire;
    std::string failure;
    try {
      launcher.start(e.job);
    } catch (const std::exception& err) {
      failure = err.what();
    }
    // Every fire up to now is handled by this run, however many were missed.
    store.set_handled_until(e.job.name, to_unix_ns(now));
    e.job.handled_until_ns = to_unix_ns(now);
    update_next_fire(e);
    statuses_changed = true;
    if (!failure.empty()) {
      emit(Kind::kStartFailed, e, [&](SchedulerEvent& ev) {
        ev.due = due_at;
        ev.message = failure;
      });
      return;
    }
    e.running = true;
    e.status.running = true;
    e.started = now;
    ++running;
    emit(Kind::kStarted, e, [&](SchedulerEvent& ev) {
      ev.due = due_at;
      ev.missed_while_down = due_at < started_at;
    });
  }

  void reap(TimePoint now) {
    for (const FinishedRun& run : launcher.reap()) {
      auto it = entries.find(run.job);
      if (it == entries.end() || !it->second.running) continue;
      Entry& e = it->second;
      e.running = false;
      --running;
      e.status = load_status(e.job, e.status);
      e.status.running = false;
      e.status.next_fire = e.next_fire == TimePoint::max() ? std::nullopt : std::optional(e.next_fire);
      statuses_changed = true;
      note_outcome(run.exit_code);
      emit(Kind::kFinished, e, [&](SchedulerEvent& ev) {
        ev.exit_code = run.exit_code;
        ev.duration = std::chrono::duration_cast<std::chrono::milliseconds>(now - e.started);
      });
      if (e.removed) entries.erase(it);
    }
  }

  void note_outcome(int exit_code) {
    switch (outcome_of_exit_code(exit_code)) {
      case catalog::JobOutcome::kSuccess: break;
      case catalog::JobOutcome::kPartial:
        if (worst_outcome_code == 0) worst_outcome_code = static_cast<int>(ErrorKind::kPartial);
        break;
      default: worst_outcome_code = static_cast<int>(ErrorKind::kFailure);
    }
  }

  void stop() {
    if (running == 0) return;
    emit_global(Kind::kStopping, std::to_string(running) + " running job(s) asked to stop (SIGTERM); waiting up to " +
                                     std::to_string(options.stop_timeout.count()) + "s");
    launcher.terminate_all();
    const std::atomic<bool> never{false};
    const auto poll = std::min<std::chrono::milliseconds>(options.poll, kStopPoll);
    const TimePoint deadline = clock.now() + options.stop_timeout;
    while (running > 0 && clock.now() < deadline) {
      clock.sleep_until(std::min(clock.now() + poll, deadline), never);
      reap(clock.now());
    }
    if (running == 0) return;
    for (auto& [name, e] : entries) {
      if (e.running) emit(Kind::kKilled, e);
    }
    launcher.kill_all();
    for (int i = 0; i < kKillPolls && running > 0; ++i) {
      clock.sleep_until(clock.now() + poll, never);
      reap(clock.now());
    }
  }

  void publish() {
    statuses_changed = false;
    if (!callbacks.on_status) return;
    std::vector<JobStatus> statuses;
    for (const auto& [name, e] : entries) statuses.push_back(e.status);
    callbacks.on_status(statuses);
  }

  void emit(Kind kind, const Entry& e, const std::function<void(SchedulerEvent&)>& fill = {}) {
    if (!callbacks.on_event) return;
    SchedulerEvent ev{.kind = kind, .job = e.job.name, .status = e.status};
    if (fill) fill(ev);
    callbacks.on_event(ev);
  }

  void emit_global(Kind kind, const std::string& message) {
    if (!callbacks.on_event) return;
    callbacks.on_event(SchedulerEvent{.kind = kind, .message = message});
  }
};

Scheduler::Scheduler(JobStore& store, JobLauncher& launcher, Clock& clock, SchedulerOptions options,
                     SchedulerCallbacks callbacks)
    : state_(std::make_unique<State>(store, launcher, clock, options, std::move(callbacks))) {}

Scheduler::~Scheduler() = default;

int Scheduler::run(const std::atomic<bool>& cancel) { return state_->run(cancel); }

}  // namespace keel::jobs
