#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "jobs/job_store.h"
#include "jobs/scheduler.h"
#include "util/error.h"
#include "test_support.h"

using namespace keel;
using namespace keel::jobs;
using namespace std::chrono_literals;
using Kind = SchedulerEvent::Kind;

namespace {

using test::TempDir;
using test::utc;

std::string iso(TimePoint t) { return test::iso_minute(t); }

// Simulated time: sleeping jumps to the wake-up time at once. At `stop_at`
// it sets the cancel flag, as SIGTERM would; `at` runs actions (edits of
// the job store) once their time has come.
class FakeClock final : public Clock {
 public:
  FakeClock(TimePoint start, TimePoint stop_at, std::atomic<bool>& cancel) : t_(start), stop_at_(stop_at), cancel_(cancel) {}

  TimePoint now() override { return t_; }
  bool sleep_until(TimePoint until, const std::atomic<bool>& cancel) override {
    if (cancel.load()) return false;
    while (!actions_.empty() && actions_.begin()->first <= until) {
      auto [when, action] = *actions_.begin();
      actions_.erase(actions_.begin());
      t_ = std::max(t_, when);
      action();
    }
    if (!stopped_ && until >= stop_at_) {
      t_ = std::max(t_, stop_at_);
      stopped_ = true;
      cancel_.store(true);
      return false;
    }
    t_ = std::max(t_, until);
    return true;
  }
  void at(TimePoint when, std::function<void()> action) { actions_.emplace(when, std::move(action)); }

 private:
  TimePoint t_, stop_at_;
  std::atomic<bool>& cancel_;
  bool stopped_ = false;
  std::multimap<TimePoint, std::function<void()>> actions_;
};

// Runs take a set time and end with a set exit code; the launcher checks
// that no job ever runs twice at once.
class FakeLauncher final : public JobLauncher {
 public:
  struct Run {
    std::string job;
    TimePoint start, end;
    int exit_code = 0;
    bool terminated = false;
  };

  explicit FakeLauncher(Clock& clock) : clock_(clock) {}

  std::map<std::string, std::chrono::minutes> durations;  // default 10 minutes
  std::map<std::string, int> exit_codes;                 // default 0
  std::set<std::string> busy;                            // held by runs elsewhere
  bool ignore_sigterm = false;
  std::vector<Run> runs;  // every run started, in order
  size_t max_running = 0;
  std::vector<std::string> overlaps;

  void start(const Job& job) override {
    for (size_t i : running_) {
      if (runs[i].job == job.name) overlaps.push_back(job.name + " at " + iso(clock_.now()));
    }
    auto d = durations.count(job.name) ? durations[job.name] : 10min;
    runs.push_back({job.name, clock_.now(), clock_.now() + d, exit_codes[job.name]});
    running_.push_back(runs.size() - 1);
    max_running = std::max(max_running, running_.size());
  }
  std::vector<FinishedRun> reap() override {
    std::vector<FinishedRun> done;
    for (auto it = running_.begin(); it != running_.end();) {
      if (runs[*it].end <= clock_.now()) {
        done.push_back({runs[*it].job, runs[*it].exit_code});
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
    return done;
  }
  bool busy_elsewhere(const Job& job) override { return busy.count(job.name) > 0; }
  void terminate_all() override {
    if (ignore_sigterm) return;
    for (size_t i : running_) {
      runs[i].end = clock_.now() + 30s;  // stops at its next safe point
      runs[i].exit_code = 130;
      runs[i].terminated = true;
    }
  }
  void kill_all() override {
    for (size_t i : running_) {
      runs[i].end = clock_.now();
      runs[i].exit_code = 137;
    }
  }

  std::vector<std::string> starts(const std::string& job) const {
    std::vector<std::string> out;
    for (const Run& r : runs) {
      if (r.job == job) out.push_back(iso(r.start));
    }
    return out;
  }

 private:
  Clock& clock_;
  std::vector<size_t> running_;
};

Job make_job(const std::string& name, const std::string& schedule, const std::string& zone, TimePoint created) {
  Job job;
  job.name = name;
  job.repo = "/nowhere";
  job.catalog = "/nowhere/catalog.db";
  job.paths = {"/data"};
  job.schedule = schedule;
  job.time_zone = zone;
  job.created_ns = to_unix_ns(created);
  return job;
}

// A scheduler over a store in a temporary directory, on simulated time.
struct Harness {
  TempDir dir;
  JobStore store{dir.file("jobs.db")};
  std::atomic<bool> cancel{false};
  FakeClock clock;
  FakeLauncher launcher{clock};
  SchedulerOptions options;
  std::vector<SchedulerEvent> events;
  std::vector<std::vector<JobStatus>> published;

  Harness(TimePoint start, TimePoint stop_at) : clock(start, stop_at, cancel) {
    options.poll = 1min;
    options.refresh = 1h;
    options.stop_timeout = 5min;
  }

  int run() {
    SchedulerCallbacks callbacks;
    callbacks.on_event = [&](const SchedulerEvent& e) { events.push_back(e); };
    callbacks.on_status = [&](const std::vector<JobStatus>& s) { published.push_back(s); };
    callbacks.load_status = [](const Job& job) {
      JobStatus s;
      s.name = job.name;
      s.rpo = job.rpo;
      return s;
    };
    Scheduler scheduler(store, launcher, clock, options, callbacks);
    return scheduler.run(cancel);
  }

  std::vector<const SchedulerEvent*> of_kind(Kind kind, const std::string& job = "") const {
    std::vector<const SchedulerEvent*> out;
    for (const auto& e : events) {
      if (e.kind == kind && (job.empty() || e.job == job)) out.push_back(&e);
    }
    return out;
  }
};

using Times = std::vector<std::string>;

}  // namespace

TEST_CASE("scheduler fires at the schedule's times across a simulated week with a DST change", "[scheduler]") {
  // Monday 2024-03-25 to Monday 2024-04-01 noon; Berlin springs forward on Sunday the 31st.
  Harness h(utc("2024-03-25T00:00"), utc("2024-04-01T12:00"));
  h.store.add(make_job("weekdays", "30 2 * * MON-FRI", "Europe/Berlin", utc("2024-03-25T00:00")));
  h.store.add(make_job("six-hourly", "0 */6 * * *", "UTC", utc("2024-03-25T00:00")));
  CHECK(h.run() == 0);

  // 02:30 CET is 01:30Z; after the change 02:30 CEST is 00:30Z.
  CHECK(h.launcher.starts("weekdays") == Times{"2024-03-25T01:30", "2024-03-26T01:30", "2024-03-27T01:30",
                                                "2024-03-28T01:30", "2024-03-29T01:30", "2024-04-01T00:30"});
  Times six = h.launcher.starts("six-hourly");
  REQUIRE(six.size() == 29);  // 3 on the first day, 4 on each of the next 6, 2 on the last morning
  CHECK(six.front() == "2024-03-25T06:00");
  CHECK(six[3] == "2024-03-26T00:00");
  CHECK(six.back() == "2024-04-01T06:00");
  CHECK(h.launcher.overlaps.empty());
  for (const SchedulerEvent* e : h.of_kind(Kind::kStarted)) {
    CHECK_FALSE(e->missed_while_down);
    CHECK(e->due.has_value());
  }
  // The store remembers the last fire handled.
  CHECK(h.store.get("weekdays").handled_until_ns == to_unix_ns(utc("2024-04-01T00:30")));
  CHECK(h.of_kind(Kind::kFinished).size() == 35);
}

TEST_CASE("scheduler catches up fires missed while it was down exactly once", "[scheduler]") {
  Harness h(utc("2024-01-01T15:30"), utc("2024-01-01T17:30"));
  Job job = make_job("hourly", "0 * * * *", "UTC", utc("2024-01-01T00:00"));
  job.handled_until_ns = to_unix_ns(utc("2024-01-01T10:00"));  // down since: 11:00 to 15:00 missed
  h.store.add(job);
  CHECK(h.run() == 0);
  CHECK(h.launcher.starts("hourly") == Times{"2024-01-01T15:30", "2024-01-01T16:00", "2024-01-01T17:00"});
  auto started = h.of_kind(Kind::kStarted);
  REQUIRE(started.size() == 3);
  CHECK(started[0]->missed_while_down);
  CHECK(iso(*started[0]->due) == "2024-01-01T11:00");  // the oldest fire missed
  CHECK_FALSE(started[1]->missed_while_down);
  CHECK(h.store.get("hourly").handled_until_ns == to_unix_ns(utc("2024-01-01T17:00")));

  SECTION("a second downtime is caught up once again, by a new scheduler") {
    std::atomic<bool> cancel{false};
    FakeClock later(utc("2024-01-01T20:10"), utc("2024-01-01T20:50"), cancel);
    FakeLauncher launcher(later);
    Scheduler again(h.store, launcher, later, h.options, {.load_status = [](const Job& j) {
                      return JobStatus{.name = j.name};
                    }});
    CHECK(again.run(cancel) == 0);
    CHECK(launcher.starts("hourly") == Times{"2024-01-01T20:10"});
  }
  SECTION("a new job waits for its first fire") {
    h.store.add(make_job("new", "0 * * * *", "UTC", utc("2024-01-01T17:45")));
    std::atomic<bool> cancel{false};
    FakeClock later(utc("2024-01-01T17:50"), utc("2024-01-01T18:30"), cancel);
    FakeLauncher launcher(later);
    Scheduler again(h.store, launcher, later, h.options, {.load_status = [](const Job& j) {
                      return JobStatus{.name = j.name};
                    }});
    again.run(cancel);
    CHECK(launcher.starts("new") == Times{"2024-01-01T18:00"});
  }
}

TEST_CASE("scheduler never overlaps runs of a job: a fire during a run runs once after it", "[scheduler]") {
  Harness h(utc("2024-01-01T00:00"), utc("2024-01-01T01:00"));
  h.store.add(make_job("often", "*/10 * * * *", "UTC", utc("2024-01-01T00:00")));
  h.launcher.durations["often"] = 25min;
  h.run();
  // 00:20 and 00:30 pass while the first run goes: one run at 00:35 serves both.
  CHECK(h.launcher.starts("often") == Times{"2024-01-01T00:10", "2024-01-01T00:35"});
  CHECK(h.launcher.overlaps.empty());
  CHECK(h.of_kind(Kind::kStartFailed).empty());
}

TEST_CASE("scheduler waits while a run started elsewhere holds the job", "[scheduler]") {
  Harness h(utc("2024-01-01T01:00"), utc("2024-01-01T03:00"));
  h.store.add(make_job("nightly", "0 2 * * *", "UTC", utc("2024-01-01T00:00")));
  h.launcher.busy.insert("nightly");
  h.clock.at(utc("2024-01-01T02:20"), [&] { h.launcher.busy.clear(); });
  h.run();
  CHECK(h.launcher.starts("nightly") == Times{"2024-01-01T02:20"});
  auto busy = h.of_kind(Kind::kBusy, "nightly");
  REQUIRE(busy.size() == 1);  // said once, not every poll
  CHECK(iso(*busy[0]->due) == "2024-01-01T02:00");
}

TEST_CASE("scheduler runs at most max_concurrent jobs at once; the others wait their turn", "[scheduler]") {
  Harness h(utc("2024-01-01T01:00"), utc("2024-01-01T03:00"));
  for (const char* name : {"a", "b", "c", "d", "e"}) h.store.add(make_job(name, "0 2 * * *", "UTC", utc("2024-01-01T00:00")));
  h.launcher.durations["a"] = 5min;
  h.options.max_concurrent = 2;
  h.run();
  CHECK(h.launcher.max_running == 2);
  CHECK(h.launcher.starts("a") == Times{"2024-01-01T02:00"});
  CHECK(h.launcher.starts("b") == Times{"2024-01-01T02:00"});
  CHECK(h.launcher.starts("c") == Times{"2024-01-01T02:05"});  // a's slot
  CHECK(h.launcher.starts("d") == Times{"2024-01-01T02:10"});  // b's
  CHECK(h.launcher.starts("e") == Times{"2024-01-01T02:15"});  // c's
  CHECK(h.of_kind(Kind::kWaiting, "c").size() == 1);
  CHECK(h.of_kind(Kind::kWaiting, "a").empty());
  // A late start serves the fire it was due for, and counts it handled.
  auto started = h.of_kind(Kind::kStarted, "e");
  REQUIRE(started.size() == 1);
  CHECK(iso(*started[0]->due) == "2024-01-01T02:00");
}

TEST_CASE("scheduler stops cleanly when cancelled: running jobs get SIGTERM, nothing new starts", "[scheduler]") {
  Harness h(utc("2024-01-01T01:00"), utc("2024-01-01T02:30"));
  h.store.add(make_job("long", "0 2 * * *", "UTC", utc("2024-01-01T00:00")));
  h.store.add(make_job("later", "45 2 * * *", "UTC", utc("2024-01-01T00:00")));
  h.launcher.durations["long"] = 60min;

  SECTION("a run that stops at its next safe point is waited for") {
    CHECK(h.run() == 0);
    REQUIRE(h.launcher.runs.size() == 1);
    CHECK(h.launcher.runs[0].terminated);
    CHECK(iso(h.launcher.runs[0].end) == "2024-01-01T02:30");  // 30 s after the cancel, within a minute
    auto finished = h.of_kind(Kind::kFinished, "long");
    REQUIRE(finished.size() == 1);
    CHECK(finished[0]->exit_code == 130);
    CHECK(h.of_kind(Kind::kStopping).size() == 1);
    CHECK(h.of_kind(Kind::kKilled).empty());
    CHECK(h.launcher.starts("later").empty());
  }
  SECTION("a run that ignores SIGTERM is killed after the stop timeout") {
    h.launcher.ignore_sigterm = true;
    CHECK(h.run() == 0);
    CHECK(h.of_kind(Kind::kKilled, "long").size() == 1);
    auto finished = h.of_kind(Kind::kFinished, "long");
    REQUIRE(finished.size() == 1);
    CHECK(finished[0]->exit_code == 137);
    CHECK(h.launcher.runs[0].end - utc("2024-01-01T02:30") == 5min);  // the stop timeout
    CHECK(h.launcher.starts("later").empty());
  }
}

TEST_CASE("scheduler --once runs the jobs due at the start and reports the worst outcome", "[scheduler]") {
  Harness h(utc("2024-01-02T12:00"), utc("2024-01-03T12:00"));
  h.options.once = true;
  h.store.add(make_job("missed", "0 2 * * *", "UTC", utc("2024-01-01T00:00")));
  h.store.add(make_job("not-due", "0 18 * * *", "UTC", utc("2024-01-02T00:00")));

  SECTION("success") {
    CHECK(h.run() == 0);
    CHECK(h.launcher.starts("missed") == Times{"2024-01-02T12:00"});
    CHECK(h.launcher.starts("not-due").empty());
    CHECK_FALSE(h.cancel.load());  // returned on its own, long before the stop time
  }
  SECTION("partial") {
    h.launcher.exit_codes["missed"] = 3;
    CHECK(h.run() == 3);
  }
  SECTION("failure") {
    h.launcher.exit_codes["missed"] = 7;
    CHECK(h.run() == 1);
  }
  SECTION("refused counts as a failure") {
    h.launcher.exit_codes["missed"] = 8;
    CHECK(h.run() == 1);
  }
}

TEST_CASE("scheduler picks up jobs added and removed while it runs", "[scheduler]") {
  Harness h(utc("2024-01-01T00:00"), utc("2024-01-01T06:00"));
  h.store.add(make_job("stays", "0 * * * *", "UTC", utc("2024-01-01T00:00")));
  h.store.add(make_job("goes", "30 * * * *", "UTC", utc("2024-01-01T00:00")));
  JobStore other(h.store.path());  // another process: keel job add / remove
  h.clock.at(utc("2024-01-01T01:40"), [&] { other.add(make_job("new", "15 * * * *", "UTC", utc("2024-01-01T01:40"))); });
  h.clock.at(utc("2024-01-01T02:40"), [&] { other.remove("goes"); });
  h.run();
  CHECK(h.launcher.starts("stays").size() == 5);
  CHECK(h.launcher.starts("new") == Times{"2024-01-01T02:15", "2024-01-01T03:15", "2024-01-01T04:15", "2024-01-01T05:15"});
  CHECK(h.launcher.starts("goes") == Times{"2024-01-01T00:30", "2024-01-01T01:30", "2024-01-01T02:30"});
  CHECK(h.of_kind(Kind::kLoaded, "new").size() == 1);
  CHECK(h.of_kind(Kind::kRemoved, "goes").size() == 1);
  // Statuses are published after changes; the last lists the jobs left.
  REQUIRE_FALSE(h.published.empty());
  std::vector<std::string> names;
  for (const JobStatus& s : h.published.back()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"new", "stays"});
}

TEST_CASE("scheduler publishes which jobs are running", "[scheduler]") {
  Harness h(utc("2024-01-01T01:00"), utc("2024-01-01T03:00"));
  h.store.add(make_job("nightly", "0 2 * * *", "UTC", utc("2024-01-01T00:00")));
  h.run();
  bool seen_running = false, seen_idle_after = false;
  for (const auto& statuses : h.published) {
    REQUIRE(statuses.size() == 1);
    if (statuses[0].running) seen_running = true;
    if (seen_running && !statuses[0].running) seen_idle_after = true;
  }
  CHECK(seen_running);
  CHECK(seen_idle_after);
  REQUIRE(h.published.back()[0].next_fire.has_value());
  CHECK(iso(*h.published.back()[0].next_fire) == "2024-01-02T02:00");
}
