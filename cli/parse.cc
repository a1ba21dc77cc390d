#include "cli/parse.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

#include "util/error.h"

namespace keel::cli {
namespace {

struct Unit {
  char suffix;
  int64_t seconds;
};
// Largest first: the order a duration must be written in.
constexpr Unit kUnits[] = {{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};

[[noreturn]] void bad_value(std::string_view option, std::string_view text, const std::string& why) {
  throw Error(ErrorKind::kUsage, std::string(option) + " '" + std::string(text) + "': " + why);
}

}  // namespace

std::chrono::seconds parse_duration(std::string_view text, std::string_view option) {
  constexpr const char* kForm = "a duration is whole numbers with units d, h, m, s, largest first (90s, 30m, 1h30m, 2d)";
  if (text.empty()) bad_value(option, text, kForm);
  if (text == "0") return std::chrono::seconds(0);
  int64_t total = 0;
  size_t next_unit = 0;  // units before this one are used up
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (p != end) {
    int64_t count = 0;
    auto [after, ec] = std::from_chars(p, end, count);
    if (ec == std::errc::result_out_of_range) bad_value(option, text, "too long (at most 100 years)");
    if (ec != std::errc() || count < 0) bad_value(option, text, kForm);
    if (after == end) bad_value(option, text, "give a unit after " + std::string(p, after) + ": " + kForm);
    size_t unit = next_unit;
    while (unit < std::size(kUnits) && kUnits[unit].suffix != *after) ++unit;
    if (unit == std::size(kUnits)) bad_value(option, text, kForm);
    int64_t limit = std::numeric_limits<int64_t>::max();
    if (count > (limit - total) / kUnits[unit].seconds) bad_value(option, text, "too long (at most 100 years)");
    total += count * kUnits[unit].seconds;
    next_unit = unit + 1;
    p = after + 1;
  }
  if (total > kLongestDuration.count()) bad_value(option, text, "too long (at most 100 years)");
  return std::chrono::seconds(total);
}

double parse_fraction(std::string_view text, std::string_view option, bool allow_zero) {
  const char* form = allow_zero ? "give a percentage (10%) or a fraction (0.1) from 0 to 1"
                                : "give a percentage (10%) or a fraction (0.1) above 0 and at most 1";
  const bool percent = text.ends_with('%');
  std::string_view number = percent ? text.substr(0, text.size() - 1) : text;
  double value = 0;
  auto [after, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || after != number.data() + number.size()) bad_value(option, text, form);
  if (percent) value /= 100;
  if (!((value > 0 || (allow_zero && value == 0)) && value <= 1)) {
    bad_value(option, text, !percent && value > 1 && value <= 100 ? "did you mean " + std::string(text) + "%?" : form);
  }
  return value;
}

uint64_t parse_size(std::string_view text, std::string_view option) {
  constexpr const char* kForm = "give bytes, or a whole number with K, M, G or T (binary units): 4096, 500M, 10GiB";
  uint64_t count = 0;
  auto [after, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec == std::errc::result_out_of_range) bad_value(option, text, "too large");
  if (ec != std::errc() || after == text.data()) bad_value(option, text, kForm);
  std::string_view unit(after, static_cast<size_t>(text.data() + text.size() - after));
  int shift = 0;
  if (!unit.empty()) {
    constexpr std::string_view kPrefixes = "KMGT";
    size_t prefix = kPrefixes.find(unit[0]);
    std::string_view rest = unit.substr(1);
    if (prefix == std::string_view::npos || !(rest.empty() || rest == "B" || rest == "iB")) {
      bad_value(option, text, kForm);
    }
    shift = 10 * static_cast<int>(prefix + 1);
  }
  if (count > (std::numeric_limits<uint64_t>::max() >> shift)) bad_value(option, text, "too large");
  return count << shift;
}

uint64_t parse_count(std::string_view text, std::string_view option, uint64_t min, uint64_t max,
                     std::string_view unit) {
  const std::string range = "give a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
                            (unit.empty() ? "" : " (" + std::string(unit) + ")");
  // from_chars on an unsigned type takes no sign, so "-1" cannot wrap around.
  uint64_t value = 0;
  auto [after, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) bad_value(option, text, "too large: " + range);
  if (ec != std::errc() || after != text.data() + text.size()) bad_value(option, text, range);
  if (value < min || value > max) bad_value(option, text, (value < min ? "too small: " : "too large: ") + range);
  return value;
}

}  // namespace keel::cli
