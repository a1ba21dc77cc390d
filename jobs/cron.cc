#include "jobs/cron.h"

#include <unicode/timezone.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <vector>

#include "util/error.h"

namespace keel::jobs {
namespace {

using std::chrono::days;
using std::chrono::minutes;
using Millis = int64_t;  // Unix time in milliseconds, as ICU counts

constexpr Millis kMinuteMs = 60'000;
constexpr int kMinutesPerDay = 24 * 60;
// Wall time never moves by more than this at a zone transition; it bounds
// how far around an instant the search looks for a repeated hour.
constexpr int kMaxShiftMinutes = 3 * 60;
// Time zone transitions lie further apart than this, so the offsets this far
// before and after a wall time are the two it can have.
constexpr Millis kTransitionGapMs = Millis{26} * 3600 * 1000;
// A valid schedule fires within this many years (February 29th: every 4,
// or 8 across a century that is no leap year).
constexpr int kSearchYears = 9;

constexpr std::array<std::string_view, 12> kMonthNames = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<std::string_view, 7> kDayNames = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const std::string_view* names = nullptr;  // names[i] stands for min + i
  size_t name_count = 0;
};

constexpr FieldSpec kMinute{"minute", 0, 59};
constexpr FieldSpec kHour{"hour", 0, 23};
constexpr FieldSpec kDayOfMonth{"day-of-month", 1, 31};
constexpr FieldSpec kMonth{"month", 1, 12, kMonthNames.data(), kMonthNames.size()};
constexpr FieldSpec kDayOfWeek{"day-of-week", 0, 7, kDayNames.data(), kDayNames.size()};

constexpr std::pair<std::string_view, std::string_view> kShorthands[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
};

class FieldParser {
 public:
  FieldParser(std::string_view schedule, const FieldSpec& spec) : schedule_(schedule), spec_(spec) {}

  // Bit v set: value v matches.
  uint64_t parse(std::string_view field) const {
    uint64_t bits = 0;
    size_t start = 0;
    while (true) {
      size_t comma = field.find(',', start);
      std::string_view item = field.substr(start, comma == std::string_view::npos ? field.npos : comma - start);
      if (item.empty()) fail("'" + std::string(field) + "' has an empty list item");
      bits |= parse_item(item);
      if (comma == std::string_view::npos) return bits;
      start = comma + 1;
    }
  }

 private:
  uint64_t parse_item(std::string_view item) const {
    std::string_view range = item;
    int step = 1;
    bool stepped = false;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      range = item.substr(0, slash);
      step = number(item.substr(slash + 1), "step");
      stepped = true;
      if (step < 1 || step > spec_.max - spec_.min) {
        fail("step " + std::to_string(step) + " in '" + std::string(item) + "' must be 1 to " +
             std::to_string(spec_.max - spec_.min));
      }
    }
    int low = spec_.min, high = spec_.max;
    if (range != "*") {
      size_t dash = range.find('-');
      low = value(range.substr(0, dash));
      if (dash != std::string_view::npos) {
        high = value(range.substr(dash + 1));
        if (low > high) fail("range '" + std::string(range) + "' runs backwards");
      } else if (!stepped) {
        high = low;  // "5" alone; "5/10" runs from 5 to the end
      }
    }
    uint64_t bits = 0;
    for (int v = low; v <= high; v += step) bits |= uint64_t{1} << v;
    return bits;
  }

  int value(std::string_view text) const {
    for (size_t i = 0; i < spec_.name_count; ++i) {
      std::string_view name = spec_.names[i];
      if (text.size() == name.size() &&
          std::equal(text.begin(), text.end(), name.begin(),
                     [](char a, char b) { return std::toupper(static_cast<unsigned char>(a)) == b; })) {
        return spec_.min + static_cast<int>(i);
      }
    }
    int v = number(text, "value");
    if (v < spec_.min || v > spec_.max) {
      fail(std::to_string(v) + " is out of range " + std::to_string(spec_.min) + "-" + std::to_string(spec_.max));
    }
    return v;
  }

  int number(std::string_view text, const char* what) const {
    int v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      std::string hint = spec_.names ? " (a number or a name like " + std::string(spec_.names[1]) + ")" : "";
      fail("'" + std::string(text) + "' is not a " + what + hint);
    }
    return v;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorKind::kUsage, "schedule '" + std::string(schedule_) + "': " + spec_.name + ": " + why);
  }

  std::string_view schedule_;
  const FieldSpec& spec_;
};

std::vector<std::string_view> split_fields(std::string_view text) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

std::string utf8(const icu::UnicodeString& s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

bool has(uint64_t bits, int v) { return (bits >> v) & 1; }

}  // namespace

struct CronSchedule::Impl {
  std::string text;
  std::string zone_name;
  std::unique_ptr<const icu::TimeZone> zone;
  // Bit v set: value v matches.
  uint64_t minute_bits = 0, hour_bits = 0, dom_bits = 0, month_bits = 0, dow_bits = 0;
  // Fields that start with '*' leave the day to the other field (crontab(5)).
  bool dom_restricted = false, dow_restricted = false;
  // An hour field starting with '*' follows elapsed time across DST changes.
  bool hour_follows_clock = false;

  // Offset of local time from UTC at `t`, in ms. ICU's const calls are
  // thread-safe.
  Millis offset_at(Millis t) const {
    int32_t raw = 0, dst = 0;
    UErrorCode status = U_ZERO_ERROR;
    zone->getOffset(static_cast<UDate>(t), false, raw, dst, status);
    if (U_FAILURE(status)) {
      throw Error(ErrorKind::kFailure, "time zone " + zone_name + ": " + u_errorName(status));
    }
    return Millis{raw} + dst;
  }

  // The wall-clock minute (minutes since 1970-01-01 00:00 local) of `t`.
  int64_t wall_minute(Millis t) const {
    Millis local = t + offset_at(t);
    return local / kMinuteMs - (local % kMinuteMs < 0 ? 1 : 0);
  }

  bool day_matches(const std::chrono::year_month_day& ymd, std::chrono::weekday wd) const {
    bool dom = has(dom_bits, static_cast<int>(static_cast<unsigned>(ymd.day())));
    bool dow = has(dow_bits, static_cast<int>(wd.c_encoding()));
    return dom_restricted && dow_restricted ? dom || dow : dom && dow;
  }

  // The first wall minute at or after `wall` that the fields match.
  int64_t next_match(int64_t wall) const {
    using namespace std::chrono;
    sys_days day = floor<days>(sys_time<minutes>(minutes(wall)));
    int minute_of_day = static_cast<int>(wall - day.time_since_epoch().count() * kMinutesPerDay);
    const year limit = year_month_day(day).year() + years(kSearchYears);
    while (true) {
      year_month_day ymd(day);
      if (ymd.year() > limit) {
        throw Error(ErrorKind::kFailure, "schedule '" + text + "' does not fire within " +
                                             std::to_string(kSearchYears) + " years");
      }
      if (!has(month_bits, static_cast<int>(static_cast<unsigned>(ymd.month())))) {
        year_month_day first = ymd.year() / ymd.month() / 1;
        day = sys_days(first + months(1));
        minute_of_day = 0;
        continue;
      }
      if (!day_matches(ymd, weekday(day))) {
        day += days(1);
        minute_of_day = 0;
        continue;
      }
      int hour = minute_of_day / 60, minute = minute_of_day % 60;
      int next_hour = next_bit(hour_bits, hour, 23);
      if (next_hour < 0) {
        day += days(1);
        minute_of_day = 0;
        continue;
      }
      if (next_hour > hour) minute = 0;
      int next_minute = next_bit(minute_bits, minute, 59);
      if (next_minute < 0) {
        minute_of_day = (next_hour + 1) * 60;
        if (minute_of_day >= kMinutesPerDay) {
          day += days(1);
          minute_of_day = 0;
        }
        continue;
      }
      return day.time_since_epoch().count() * kMinutesPerDay + next_hour * 60 + next_minute;
    }
  }

  // Adds the instants at which wall minute `wall` fires (see cron.h).
  void instants_of(int64_t wall, std::vector<Millis>& out) const {
    const Millis local = wall * kMinuteMs;
    const Millis before = offset_at(local - kTransitionGapMs), after = offset_at(local + kTransitionGapMs);
    // The wall time read under each offset; those that read back are real.
    std::vector<Millis> real;
    for (Millis offset : {before, after}) {
      Millis t = local - offset;
      if (t + offset_at(t) == local && std::find(real.begin(), real.end(), t) == real.end()) real.push_back(t);
    }
    std::sort(real.begin(), real.end());
    if (real.empty()) {
      // Skipped by a jump forward. The gap ends at the transition, which
      // lies between the two readings: offset `before` at low, not at high.
      if (hour_follows_clock) return;
      Millis low = local - after, high = local - before;
      while (high - low > 1) {
        Millis mid = low + (high - low) / 2;
        (offset_at(mid) == before ? low : high) = mid;
      }
      out.push_back(high);
      return;
    }
    // Repeated by a jump back: fixed-hour jobs fire the first time only.
    out.insert(out.end(), real.begin(), hour_follows_clock ? real.end() : real.begin() + 1);
  }

  static int next_bit(uint64_t bits, int from, int max) {
    for (int v = from; v <= max; ++v) {
      if (has(bits, v)) return v;
    }
    return -1;
  }
};

CronSchedule CronSchedule::parse(std::string_view text, std::string_view time_zone) {
  auto impl = std::make_shared<Impl>();
  impl->text = std::string(text);
  std::string_view expression = text;
  for (const auto& [name, fields] : kShorthands) {
    if (text == name) expression = fields;
  }
  if (text.starts_with('@') && expression == text) {
    throw Error(ErrorKind::kUsage, "schedule '" + std::string(text) +
                                       "': unknown shorthand (use @hourly, @daily, @weekly, @monthly or @yearly; "
                                       "runs missed while the scheduler was down are caught up anyway)");
  }
  std::vector<std::string_view> fields = split_fields(expression);
  if (fields.size() != 5) {
    throw Error(ErrorKind::kUsage, "schedule '" + std::string(text) + "': needs 5 fields (minute hour day-of-month " +
                                       "month day-of-week) or a shorthand like @daily; got " +
                                       std::to_string(fields.size()));
  }
  impl->minute_bits = FieldParser(text, kMinute).parse(fields[0]);
  impl->hour_bits = FieldParser(text, kHour).parse(fields[1]);
  impl->dom_bits = FieldParser(text, kDayOfMonth).parse(fields[2]);
  impl->month_bits = FieldParser(text, kMonth).parse(fields[3]);
  impl->dow_bits = FieldParser(text, kDayOfWeek).parse(fields[4]);
  if (has(impl->dow_bits, 7)) impl->dow_bits = (impl->dow_bits & 0x7f) | 1;  // 7 is Sunday too
  impl->hour_follows_clock = fields[1].starts_with('*');
  impl->dom_restricted = !fields[2].starts_with('*');
  impl->dow_restricted = !fields[4].starts_with('*');

  // A day of month that no chosen month has (31 in FEB) would never fire.
  if (impl->dom_restricted && !impl->dow_restricted) {
    constexpr int kLongest[] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool possible = false;
    for (int m = 1; m <= 12 && !possible; ++m) {
      possible = has(impl->month_bits, m) && std::countr_zero(impl->dom_bits) <= kLongest[m];
    }
    if (!possible) {
      throw Error(ErrorKind::kUsage, "schedule '" + std::string(text) + "': day-of-month: '" +
                                         std::string(fields[2]) + "' never falls in month '" +
                                         std::string(fields[3]) + "'");
    }
  }

  icu::TimeZone* zone = time_zone.empty()
                            ? icu::TimeZone::createDefault()
                            : icu::TimeZone::createTimeZone(icu::UnicodeString::fromUTF8(
                                  icu::StringPiece(time_zone.data(), static_cast<int32_t>(time_zone.size()))));
  impl->zone.reset(zone);
  if (!zone || *zone == icu::TimeZone::getUnknown()) {
    throw Error(ErrorKind::kUsage, time_zone.empty()
                                       ? "cannot tell this machine's time zone: give one (e.g. --timezone UTC)"
                                       : "unknown time zone '" + std::string(time_zone) +
                                             "': give an IANA name such as Europe/Berlin or UTC (case matters)");
  }
  icu::UnicodeString id;
  zone->getID(id);
  impl->zone_name = utf8(id);
  return CronSchedule(std::move(impl));
}

CronSchedule::TimePoint CronSchedule::next_after(TimePoint t) const {
  const Millis after = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::optional<Millis> best;
  int64_t best_wall = 0;
  std::vector<Millis> instants;
  // Start a little before `t`'s wall time: after a jump back, wall times
  // already passed come round again.
  for (int64_t wall = impl_->next_match(impl_->wall_minute(after) - kMaxShiftMinutes);;
       wall = impl_->next_match(wall + 1)) {
    if (best && wall > best_wall + kMaxShiftMinutes) break;  // later wall times fire later
    instants.clear();
    impl_->instants_of(wall, instants);
    for (Millis i : instants) {
      if (i > after && (!best || i < *best)) {
        best = i;
        best_wall = wall;
      }
    }
  }
  return TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::milliseconds(*best)));
}

const std::string& CronSchedule::text() const { return impl_->text; }
const std::string& CronSchedule::time_zone() const { return impl_->zone_name; }

}  // namespace keel::jobs
