// Cron schedules: when a job fires.
//
// Five fields, as in crontab(5): minute (0-59), hour (0-23), day of month
// (1-31), month (1-12 or JAN-DEC) and day of week (0-7 or SUN-SAT; 0 and 7
// are both Sunday). A field is `*`, a value, a range `1-5`, a step `*/15`,
// `1-10/2` or `5/10` (5 to the end, every 10th), or a comma list of those.
// Names are case-insensitive. When both day fields are restricted (neither
// starts with `*`) a day matching either fires; otherwise a day must match
// both. Shorthands: @yearly (@annually), @monthly, @weekly, @daily
// (@midnight), @hourly.
//
// Fields are wall-clock times in an IANA time zone. Across DST changes a job
// whose hour field is fixed (does not start with `*`) fires once per
// matching day:
//  - a time that does not exist (spring forward: 02:30 in Europe/Berlin on
//    the last Sunday of March) fires once, at the first valid instant after
//    it (03:00, when the clock jumps);
//  - a time that happens twice (fall back: 02:30 in Europe/Berlin on the
//    last Sunday of October) fires once, the first time.
// A job whose hour field starts with `*` (every hour, every 2 hours) follows
// elapsed time instead: it skips wall times that do not exist and fires at
// both occurrences of a repeated hour, so its runs stay evenly spaced.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace keel::jobs {

class CronSchedule {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  // `time_zone`: an IANA name ("Europe/Berlin", "UTC"); empty: this
  // machine's zone (TZ, else /etc/localtime). Throws Error(kUsage) naming
  // the field and what is wrong, or the unknown zone.
  static CronSchedule parse(std::string_view text, std::string_view time_zone = {});

  // The first instant strictly after `t` at which the schedule fires, on a
  // whole minute.
  TimePoint next_after(TimePoint t) const;

  const std::string& text() const;       // as given
  const std::string& time_zone() const;  // the zone's IANA name, also when it was the default

 private:
  struct Impl;
  explicit CronSchedule(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace keel::jobs
