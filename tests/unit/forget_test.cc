#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/forget.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;
using catalog::SnapshotRecord;

namespace {

// Sets TZ for one test and puts the old value back.
class TimeZone {
 public:
  explicit TimeZone(const char* tz) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    ::setenv("TZ", tz, 1);
    ::tzset();
  }
  ~TimeZone() {
    if (old_) {
      ::setenv("TZ", old_->c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }

 private:
  std::optional<std::string> old_;
};

// "2024-12-31 18:00" (UTC) as Unix nanoseconds.
int64_t utc_ns(const std::string& text) {
  std::tm tm{};
  REQUIRE(strptime(text.c_str(), "%Y-%m-%d %H:%M", &tm) != nullptr);
  return static_cast<int64_t>(timegm(&tm)) * 1'000'000'000;
}

std::string utc_text(int64_t ns) {
  std::time_t t = ns / 1'000'000'000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

SnapshotRecord snapshot(int64_t time_ns, std::string host = "a", std::vector<std::string> paths = {"/data"},
                        std::vector<std::string> tags = {}) {
  SnapshotRecord s;
  s.id = Id::random();
  s.time_ns = time_ns;
  s.host = std::move(host);
  s.paths = std::move(paths);
  s.tags = std::move(tags);
  return s;
}

// Every six hours from 2022-01-01 00:00 to 2024-12-31 18:00 UTC: three years.
std::vector<SnapshotRecord> six_hourly_history() {
  std::vector<SnapshotRecord> history;
  for (int64_t t = utc_ns("2022-01-01 00:00"); t <= utc_ns("2024-12-31 18:00"); t += int64_t{6 * 3600} * 1'000'000'000) {
    history.push_back(snapshot(t));
  }
  return history;
}

std::set<std::string> kept_times(const std::vector<ForgetDecision>& decisions) {
  std::set<std::string> kept;
  for (const ForgetDecision& d : decisions) {
    if (d.keep) kept.insert(utc_text(d.snapshot.time_ns));
  }
  return kept;
}

const ForgetDecision& decision_at(const std::vector<ForgetDecision>& decisions, const std::string& time) {
  for (const ForgetDecision& d : decisions) {
    if (utc_text(d.snapshot.time_ns) == time) return d;
  }
  FAIL("no snapshot at " << time);
  throw;
}

RetentionPolicy policy(uint32_t last, uint32_t hourly, uint32_t daily, uint32_t weekly, uint32_t monthly,
                       uint32_t yearly) {
  RetentionPolicy p;
  p.last = last;
  p.hourly = hourly;
  p.daily = daily;
  p.weekly = weekly;
  p.monthly = monthly;
  p.yearly = yearly;
  return p;
}

}  // namespace

TEST_CASE("forget keeps exactly what each policy says over three years of history", "[forget]") {
  TimeZone utc("UTC");
  struct Case {
    const char* name;
    RetentionPolicy policy;
    std::set<std::string> kept;
  };
  const std::vector<Case> cases = {
      {"last 3", policy(3, 0, 0, 0, 0, 0), {"2024-12-31 18:00", "2024-12-31 12:00", "2024-12-31 06:00"}},
      {"hourly 2", policy(0, 2, 0, 0, 0, 0), {"2024-12-31 18:00", "2024-12-31 12:00"}},
      {"daily 3", policy(0, 0, 3, 0, 0, 0), {"2024-12-31 18:00", "2024-12-30 18:00", "2024-12-29 18:00"}},
      // 2024-12-30 (Monday) starts ISO week 2025-W01; the week before ends on Sunday the 29th.
      {"weekly 3", policy(0, 0, 0, 3, 0, 0), {"2024-12-31 18:00", "2024-12-29 18:00", "2024-12-22 18:00"}},
      {"monthly 3", policy(0, 0, 0, 0, 3, 0), {"2024-12-31 18:00", "2024-11-30 18:00", "2024-10-31 18:00"}},
      {"yearly 5: only three years have snapshots", policy(0, 0, 0, 0, 0, 5),
       {"2024-12-31 18:00", "2023-12-31 18:00", "2022-12-31 18:00"}},
      {"last 2 + daily 2 + monthly 2", policy(2, 0, 2, 0, 2, 0),
       {"2024-12-31 18:00", "2024-12-31 12:00", "2024-12-30 18:00", "2024-11-30 18:00"}},
      {"daily 1 + weekly 1 + monthly 1 + yearly 1 all pick the newest", policy(0, 0, 1, 1, 1, 1), {"2024-12-31 18:00"}},
      {"every rule", policy(1, 1, 2, 2, 2, 2),
       {"2024-12-31 18:00", "2024-12-30 18:00", "2024-12-29 18:00", "2024-11-30 18:00", "2023-12-31 18:00"}},
  };
  std::vector<SnapshotRecord> history = six_hourly_history();
  REQUIRE(history.size() == 1096 * 4);
  for (const Case& c : cases) {
    SECTION(c.name) {
      std::vector<ForgetDecision> decisions = plan_forget(history, {}, c.policy, GroupBy::kHostAndPaths);
      CHECK(decisions.size() == history.size());
      CHECK(kept_times(decisions) == c.kept);
      for (const ForgetDecision& d : decisions) CHECK(d.keep == !d.reasons.empty());
    }
  }
}

TEST_CASE("forget records why each snapshot is kept", "[forget]") {
  TimeZone utc("UTC");
  std::vector<SnapshotRecord> history = six_hourly_history();
  std::vector<ForgetDecision> decisions = plan_forget(history, {}, policy(2, 1, 2, 1, 2, 1), GroupBy::kHostAndPaths);
  CHECK(decision_at(decisions, "2024-12-31 18:00").reasons ==
        std::vector<std::string>{"last 1", "hourly 2024-12-31 18h", "daily 2024-12-31", "weekly 2025-W01",
                                 "monthly 2024-12", "yearly 2024"});
  CHECK(decision_at(decisions, "2024-12-31 12:00").reasons == std::vector<std::string>{"last 2"});
  CHECK(decision_at(decisions, "2024-12-30 18:00").reasons == std::vector<std::string>{"daily 2024-12-30"});
  CHECK(decision_at(decisions, "2024-11-30 18:00").reasons == std::vector<std::string>{"monthly 2024-11"});
  CHECK(decision_at(decisions, "2024-11-30 12:00").reasons.empty());
  CHECK_FALSE(decision_at(decisions, "2024-11-30 12:00").keep);
}

TEST_CASE("forget buckets count only periods that have a snapshot", "[forget]") {
  TimeZone utc("UTC");
  std::vector<SnapshotRecord> history;
  for (const char* t : {"2024-03-01 10:00", "2024-03-01 09:00", "2024-02-20 08:00", "2024-01-05 12:00", "2023-12-31 23:59"}) {
    history.push_back(snapshot(utc_ns(t)));
  }
  struct Case {
    RetentionPolicy policy;
    std::set<std::string> kept;
  };
  const std::vector<Case> cases = {
      {policy(0, 2, 0, 0, 0, 0), {"2024-03-01 10:00", "2024-03-01 09:00"}},
      {policy(0, 0, 3, 0, 0, 0), {"2024-03-01 10:00", "2024-02-20 08:00", "2024-01-05 12:00"}},
      {policy(0, 0, 0, 0, 2, 0), {"2024-03-01 10:00", "2024-02-20 08:00"}},
      {policy(0, 0, 0, 0, 0, 2), {"2024-03-01 10:00", "2023-12-31 23:59"}},
      {policy(10, 0, 0, 0, 0, 0),
       {"2024-03-01 10:00", "2024-03-01 09:00", "2024-02-20 08:00", "2024-01-05 12:00", "2023-12-31 23:59"}},
  };
  for (const Case& c : cases) CHECK(kept_times(plan_forget(history, {}, c.policy, GroupBy::kNone)) == c.kept);
}

TEST_CASE("forget buckets follow local time", "[forget]") {
  // 2024-12-31 18:00 UTC is 2025-01-01 03:00 in UTC+9: a new day, month and year there.
  std::vector<SnapshotRecord> history = {snapshot(utc_ns("2024-12-31 18:00")), snapshot(utc_ns("2024-12-31 12:00"))};
  {
    TimeZone utc("UTC");
    CHECK(kept_times(plan_forget(history, {}, policy(0, 0, 2, 0, 0, 0), GroupBy::kNone)) ==
          std::set<std::string>{"2024-12-31 18:00"});
  }
  TimeZone tokyo("JST-9");
  std::vector<ForgetDecision> decisions = plan_forget(history, {}, policy(0, 0, 2, 0, 0, 1), GroupBy::kNone);
  CHECK(kept_times(decisions) == std::set<std::string>{"2024-12-31 18:00", "2024-12-31 12:00"});
  CHECK(decision_at(decisions, "2024-12-31 18:00").reasons == std::vector<std::string>{"daily 2025-01-01", "yearly 2025"});
  CHECK(decision_at(decisions, "2024-12-31 12:00").reasons == std::vector<std::string>{"daily 2024-12-31"});
}

TEST_CASE("forget applies the policy within groups", "[forget]") {
  TimeZone utc("UTC");
  std::vector<SnapshotRecord> history = {
      snapshot(utc_ns("2024-05-01 10:00"), "a", {"/home"}), snapshot(utc_ns("2024-05-02 10:00"), "a", {"/home"}),
      snapshot(utc_ns("2024-05-01 11:00"), "a", {"/etc"}),  snapshot(utc_ns("2024-05-02 11:00"), "a", {"/etc"}),
      snapshot(utc_ns("2024-05-01 12:00"), "b", {"/home"}), snapshot(utc_ns("2024-05-02 12:00"), "b", {"/home"}),
  };
  struct Case {
    GroupBy group_by;
    std::set<std::string> kept;
  };
  const std::vector<Case> cases = {
      {GroupBy::kHostAndPaths, {"2024-05-02 10:00", "2024-05-02 11:00", "2024-05-02 12:00"}},
      {GroupBy::kHost, {"2024-05-02 11:00", "2024-05-02 12:00"}},
      {GroupBy::kNone, {"2024-05-02 12:00"}},
  };
  for (const Case& c : cases) {
    std::vector<ForgetDecision> decisions = plan_forget(history, {}, policy(1, 0, 0, 0, 0, 0), c.group_by);
    CHECK(decisions.size() == history.size());
    CHECK(kept_times(decisions) == c.kept);
  }
  // Newest first within each group; groups by host, then paths.
  std::vector<ForgetDecision> decisions = plan_forget(history, {}, policy(1, 0, 0, 0, 0, 0), GroupBy::kHostAndPaths);
  std::vector<std::string> order;
  for (const ForgetDecision& d : decisions) order.push_back(utc_text(d.snapshot.time_ns));
  CHECK(order == std::vector<std::string>{"2024-05-02 11:00", "2024-05-01 11:00", "2024-05-02 10:00",
                                          "2024-05-01 10:00", "2024-05-02 12:00", "2024-05-01 12:00"});
}

TEST_CASE("forget considers only the selected snapshots", "[forget]") {
  TimeZone utc("UTC");
  std::vector<SnapshotRecord> history = {
      snapshot(utc_ns("2024-05-01 10:00"), "a", {"/home"}, {"job:nightly"}),
      snapshot(utc_ns("2024-05-02 10:00"), "a", {"/home"}, {"job:nightly", "manual"}),
      snapshot(utc_ns("2024-05-03 10:00"), "a", {"/home"}, {}),
      snapshot(utc_ns("2024-05-01 10:00"), "b", {"/home", "/etc"}, {"job:nightly"}),
      snapshot(utc_ns("2024-05-02 10:00"), "b", {"/home", "/etc"}, {"job:nightly"}),
  };
  auto chosen = [&](const SnapshotSelection& selection) {
    std::multiset<std::string> out;
    for (const ForgetDecision& d : plan_forget(history, selection, policy(1, 0, 0, 0, 0, 0), GroupBy::kNone)) {
      out.insert(d.snapshot.host + " " + utc_text(d.snapshot.time_ns));
    }
    return out;
  };
  using Set = std::multiset<std::string>;
  CHECK(chosen({}).size() == 5);
  CHECK(chosen({.hosts = {"b"}}) == Set{"b 2024-05-01 10:00", "b 2024-05-02 10:00"});
  CHECK(chosen({.hosts = {"a", "b"}}).size() == 5);
  CHECK(chosen({.tags = {"job:nightly"}}) ==
        Set{"a 2024-05-01 10:00", "a 2024-05-02 10:00", "b 2024-05-01 10:00", "b 2024-05-02 10:00"});
  CHECK(chosen({.tags = {"job:nightly", "manual"}}) == Set{"a 2024-05-02 10:00"});
  CHECK(chosen({.paths = {"/etc"}}) == Set{"b 2024-05-01 10:00", "b 2024-05-02 10:00"});
  CHECK(chosen({.hosts = {"a"}, .tags = {"job:nightly"}}) == Set{"a 2024-05-01 10:00", "a 2024-05-02 10:00"});
  CHECK(chosen({.hosts = {"c"}}).empty());
}

TEST_CASE("forget keeps snapshots with a keep tag whatever the rules say", "[forget]") {
  TimeZone utc("UTC");
  std::vector<SnapshotRecord> history = six_hourly_history();
  for (SnapshotRecord& s : history) {
    if (utc_text(s.time_ns) == "2023-06-15 06:00") s.tags = {"pinned"};
    if (utc_text(s.time_ns) == "2022-02-02 00:00") s.tags = {"release", "other"};
  }
  RetentionPolicy p = policy(1, 0, 0, 0, 0, 0);
  p.keep_tags = {"pinned", "release"};
  std::vector<ForgetDecision> decisions = plan_forget(history, {}, p, GroupBy::kHostAndPaths);
  CHECK(kept_times(decisions) == std::set<std::string>{"2024-12-31 18:00", "2023-06-15 06:00", "2022-02-02 00:00"});
  CHECK(decision_at(decisions, "2023-06-15 06:00").reasons == std::vector<std::string>{"tag pinned"});

  // Tags alone are a policy: everything else goes.
  RetentionPolicy tags_only;
  tags_only.keep_tags = {"pinned"};
  CHECK_FALSE(tags_only.empty());
  CHECK(kept_times(plan_forget(history, {}, tags_only, GroupBy::kHostAndPaths)) ==
        std::set<std::string>{"2023-06-15 06:00"});
}

TEST_CASE("forget decisions do not depend on the input order", "[forget]") {
  TimeZone utc("UTC");
  std::vector<SnapshotRecord> history = six_hourly_history();
  // Two snapshots at the same time: the id breaks the tie, the same way every time.
  history.push_back(snapshot(utc_ns("2024-12-31 18:00")));
  RetentionPolicy p = policy(3, 5, 7, 4, 12, 3);
  std::vector<ForgetDecision> first = plan_forget(history, {}, p, GroupBy::kHostAndPaths);
  std::mt19937 rng(42);
  std::shuffle(history.begin(), history.end(), rng);
  std::vector<ForgetDecision> second = plan_forget(history, {}, p, GroupBy::kHostAndPaths);
  REQUIRE(first.size() == second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    CHECK(first[i].snapshot.id == second[i].snapshot.id);
    CHECK(first[i].keep == second[i].keep);
    CHECK(first[i].reasons == second[i].reasons);
  }
}

TEST_CASE("forget refuses an empty policy", "[forget]") {
  std::vector<SnapshotRecord> history = {snapshot(utc_ns("2024-05-01 10:00"))};
  RetentionPolicy none;
  CHECK(none.empty());
  try {
    plan_forget(history, {}, none, GroupBy::kHostAndPaths);
    FAIL("an empty policy was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kUsage);
    CHECK_THAT(e.what(), Catch::Contains("--keep-last"));
  }
}
