#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "jobs/cron.h"
#include "util/error.h"
#include "test_support.h"

using keel::Error;
using keel::ErrorKind;
using keel::jobs::CronSchedule;
using TimePoint = CronSchedule::TimePoint;

namespace {

using keel::test::utc;

std::string iso(TimePoint t) { return keel::test::iso_minute(t); }

// The next `n` fire times after `from`, in UTC.
std::vector<std::string> fires(const std::string& schedule, const char* zone, const char* from, size_t n) {
  CronSchedule cron = CronSchedule::parse(schedule, zone);
  std::vector<std::string> out;
  TimePoint t = utc(from);
  for (size_t i = 0; i < n; ++i) {
    t = cron.next_after(t);
    out.push_back(iso(t));
  }
  return out;
}

using Times = std::vector<std::string>;

}  // namespace

TEST_CASE("cron fields: values, lists, ranges, steps and names (UTC)", "[cron]") {
  struct Case {
    const char* schedule;
    const char* from;
    Times expected;
  };
  const Case cases[] = {
      {"*/15 * * * *", "2024-01-01T00:07", {"2024-01-01T00:15", "2024-01-01T00:30", "2024-01-01T00:45", "2024-01-01T01:00"}},
      // Strictly after: a time that fires is not its own next.
      {"*/15 * * * *", "2024-01-01T00:15", {"2024-01-01T00:30"}},
      {"*/15 * * * *", "2024-01-01T00:14:59", {"2024-01-01T00:15"}},
      {"0 2 * * *", "2024-01-01T03:00", {"2024-01-02T02:00", "2024-01-03T02:00"}},
      {"1-10/2 * * * *", "2024-01-01T00:00", {"2024-01-01T00:01", "2024-01-01T00:03", "2024-01-01T00:05",
                                              "2024-01-01T00:07", "2024-01-01T00:09", "2024-01-01T01:01"}},
      {"5/20 * * * *", "2024-01-01T00:00", {"2024-01-01T00:05", "2024-01-01T00:25", "2024-01-01T00:45", "2024-01-01T01:05"}},
      {"0,30 9-10 * * *", "2024-01-01T00:00", {"2024-01-01T09:00", "2024-01-01T09:30", "2024-01-01T10:00",
                                               "2024-01-01T10:30", "2024-01-02T09:00"}},
      {"0 0 1 JAN,jul *", "2024-02-01T00:00", {"2024-07-01T00:00", "2025-01-01T00:00"}},
      {"0 0 1 1-12/6 *", "2024-02-01T00:00", {"2024-07-01T00:00", "2025-01-01T00:00"}},
      // 2024-01-01 is a Monday. 0, 7 and SUN are Sunday.
      {"0 0 * * SUN", "2024-01-01T00:00", {"2024-01-07T00:00", "2024-01-14T00:00"}},
      {"0 0 * * 7", "2024-01-01T00:00", {"2024-01-07T00:00"}},
      {"0 0 * * 0", "2024-01-01T00:00", {"2024-01-07T00:00"}},
      {"0 0 * * 5-7", "2024-01-01T00:00", {"2024-01-05T00:00", "2024-01-06T00:00", "2024-01-07T00:00", "2024-01-12T00:00"}},
      {"30 8 * * Mon-Fri", "2024-01-05T09:00", {"2024-01-08T08:30", "2024-01-09T08:30"}},
      // Both day fields restricted: either matches (Fridays, and the 13th).
      {"0 0 13 * FRI", "2024-01-01T00:00", {"2024-01-05T00:00", "2024-01-12T00:00", "2024-01-13T00:00", "2024-01-19T00:00"}},
      // A day field starting with '*' leaves the day to the other: odd days that are Mondays.
      {"0 0 */2 * MON", "2024-01-01T00:00", {"2024-01-15T00:00", "2024-01-29T00:00", "2024-02-05T00:00"}},
      {"0 12 29 2 *", "2024-03-01T00:00", {"2028-02-29T12:00", "2032-02-29T12:00"}},
      {"0 0 31 * *", "2024-01-31T00:00", {"2024-03-31T00:00", "2024-05-31T00:00"}},
      {"59 23 31 12 *", "2024-12-31T23:59", {"2025-12-31T23:59"}},
      {"@hourly", "2024-01-01T00:00", {"2024-01-01T01:00", "2024-01-01T02:00"}},
      {"@daily", "2024-01-01T00:00", {"2024-01-02T00:00"}},
      {"@midnight", "2024-01-01T00:00", {"2024-01-02T00:00"}},
      {"@weekly", "2024-01-01T00:00", {"2024-01-07T00:00", "2024-01-14T00:00"}},
      {"@monthly", "2024-01-15T00:00", {"2024-02-01T00:00", "2024-03-01T00:00"}},
      {"@yearly", "2024-01-01T00:00", {"2025-01-01T00:00"}},
      {"@annually", "2024-06-01T00:00", {"2025-01-01T00:00"}},
      {"  0   3  *  *  *  ", "2024-01-01T00:00", {"2024-01-01T03:00"}},
  };
  for (const Case& c : cases) {
    INFO(c.schedule << " after " << c.from);
    CHECK(fires(c.schedule, "UTC", c.from, c.expected.size()) == c.expected);
  }
}

TEST_CASE("cron rejects bad schedules naming the field and what is wrong", "[cron]") {
  struct Case {
    const char* schedule;
    const char* message;
  };
  const Case cases[] = {
      {"61 * * * *", "minute: 61 is out of range 0-59"},
      {"* 24 * * *", "hour: 24 is out of range 0-23"},
      {"* * 0 * *", "day-of-month: 0 is out of range 1-31"},
      {"* * * 13 *", "month: 13 is out of range 1-12"},
      {"* * * FOO *", "month: 'FOO' is not a value (a number or a name like FEB)"},
      {"* * * * 8", "day-of-week: 8 is out of range 0-7"},
      {"* * * * Sunday", "day-of-week: 'Sunday' is not a value"},
      {"*/0 * * * *", "minute: step 0 in '*/0' must be 1 to 59"},
      {"5-1 * * * *", "minute: range '5-1' runs backwards"},
      {"1,,2 * * * *", "minute: '1,,2' has an empty list item"},
      {"x * * * *", "minute: 'x' is not a value"},
      {"1-2-3 * * * *", "minute: '2-3' is not a value"},
      {"* * * *", "needs 5 fields"},
      {"* * * * * *", "got 6"},
      {"", "got 0"},
      {"@reboot", "unknown shorthand"},
      {"0 0 30 2 *", "day-of-month: '30' never falls in month '2'"},
      {"0 0 31 APR,JUN *", "never falls"},
  };
  for (const Case& c : cases) {
    INFO(c.schedule);
    try {
      CronSchedule::parse(c.schedule, "UTC");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kUsage);
      CHECK_THAT(e.what(), Catch::Contains(c.message) && Catch::Contains("schedule '" + std::string(c.schedule) + "'"));
    }
  }
  // Feb 30 is impossible, but with a weekday too it fires on that weekday.
  CHECK_NOTHROW(CronSchedule::parse("0 0 30 2 MON", "UTC"));
}

TEST_CASE("cron time zones: unknown zones are refused; the default zone is named", "[cron]") {
  CHECK_THROWS_WITH(CronSchedule::parse("@daily", "Mars/Olympus_Mons"), Catch::Contains("unknown time zone 'Mars/Olympus_Mons'"));
  CHECK_THROWS_AS(CronSchedule::parse("@daily", "europe/berlin"), Error);
  CronSchedule berlin = CronSchedule::parse("0 2 * * *", "Europe/Berlin");
  CHECK(berlin.time_zone() == "Europe/Berlin");
  CHECK(berlin.text() == "0 2 * * *");
  CHECK_FALSE(CronSchedule::parse("@daily").time_zone().empty());
  // Winter in Berlin is UTC+1, summer UTC+2.
  CHECK(fires("0 2 * * *", "Europe/Berlin", "2024-01-10T00:00", 1) == Times{"2024-01-10T01:00"});
  CHECK(fires("0 2 * * *", "Europe/Berlin", "2024-07-09T23:00", 1) == Times{"2024-07-10T00:00"});
  CHECK(fires("0 9 * * 1-5", "America/New_York", "2024-07-01T00:00", 2) == Times{"2024-07-01T13:00", "2024-07-02T13:00"});
  CHECK(fires("0 0 * * *", "Asia/Kolkata", "2024-01-01T00:00", 1) == Times{"2024-01-01T18:30"});
}

TEST_CASE("cron across DST: fixed times fire once, hourly ones follow elapsed time", "[cron]") {
  struct Case {
    const char* zone;
    const char* schedule;
    const char* from;
    Times expected;
  };
  const char* berlin = "Europe/Berlin";
  const char* new_york = "America/New_York";
  const Case cases[] = {
      // Berlin: 2024-03-31 02:00 CET becomes 03:00 CEST (01:00Z); 2024-10-27
      // 03:00 CEST becomes 02:00 CET (01:00Z), so 02:00-02:59 happens twice.
      // 02:30 does not exist: once, at 03:00 CEST, then 02:30 CEST the next day.
      {berlin, "30 2 * * *", "2024-03-30T12:00", {"2024-03-31T01:00", "2024-04-01T00:30"}},
      {berlin, "0 2 * * *", "2024-03-30T12:00", {"2024-03-31T01:00", "2024-04-01T00:00"}},
      // Several times in the gap still fire once.
      {berlin, "0,15,30,45 2 * * *", "2024-03-30T12:00", {"2024-03-31T01:00", "2024-04-01T00:00"}},
      // 02:30 happens twice: once, the first time (CEST), then 02:30 CET the next day.
      {berlin, "30 2 * * *", "2024-10-26T12:00", {"2024-10-27T00:30", "2024-10-28T01:30"}},
      // Asked between the two 02:30s, it does not fire again.
      {berlin, "30 2 * * *", "2024-10-27T00:45", {"2024-10-28T01:30"}},
      {berlin, "0 3 * * *", "2024-10-26T12:00", {"2024-10-27T02:00", "2024-10-28T02:00"}},
      // Hourly: 01:30 CET, then 03:30 CEST an hour later; 02:30 does not exist.
      {berlin, "30 * * * *", "2024-03-31T00:00", {"2024-03-31T00:30", "2024-03-31T01:30", "2024-03-31T02:30"}},
      // Hourly at fall-back: both 02:30s, an hour apart.
      {berlin, "30 * * * *", "2024-10-26T23:00",
       {"2024-10-26T23:30", "2024-10-27T00:30", "2024-10-27T01:30", "2024-10-27T02:30"}},
      // Asked in the second 02:00 hour, the next is its 02:30.
      {berlin, "30 * * * *", "2024-10-27T01:05", {"2024-10-27T01:30"}},
      {berlin, "*/20 * * * *", "2024-03-31T00:30", {"2024-03-31T00:40", "2024-03-31T01:00", "2024-03-31T01:20"}},
      // New York: 2024-03-10 02:00 EST becomes 03:00 EDT (07:00Z); 2024-11-03
      // 02:00 EDT becomes 01:00 EST (06:00Z), so 01:00-01:59 happens twice.
      {new_york, "30 2 * * *", "2024-03-09T12:00", {"2024-03-10T07:00", "2024-03-11T06:30"}},
      {new_york, "30 1 * * *", "2024-11-02T12:00", {"2024-11-03T05:30", "2024-11-04T06:30"}},
      {new_york, "*/30 * * * *", "2024-11-03T04:45",
       {"2024-11-03T05:00", "2024-11-03T05:30", "2024-11-03T06:00", "2024-11-03T06:30", "2024-11-03T07:00"}},
      {new_york, "0 */2 * * *", "2024-03-10T04:30", {"2024-03-10T05:00", "2024-03-10T08:00", "2024-03-10T10:00"}},
  };
  for (const Case& c : cases) {
    INFO(c.schedule << " in " << c.zone << " after " << c.from);
    CHECK(fires(c.schedule, c.zone, c.from, c.expected.size()) == c.expected);
  }
}
