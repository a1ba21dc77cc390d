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
  int64_t total = 0;
  size_t next_unit = 0;  // units before this one are used up
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (p != end) {
    int64_t count = 0;
    auto [after, ec] = std::from_chars(p, end, count);
    if (ec == std::errc::result_out_of_range) bad_value(option, text, "too long");
    if (ec != std::errc() || count < 0) bad_value(option, text, kForm);
    if (after == end) bad_value(option, text, "give a unit after " + std::string(p, after) + ": " + kForm);
    size_t unit = next_unit;
    while (unit < std::size(kUnits) && kUnits[unit].suffix != *after) ++unit;
    if (unit == std::size(kUnits)) bad_value(option, text, kForm);
    int64_t limit = std::numeric_limits<int64_t>::max();
    if (count > (limit - total) / kUnits[unit].seconds) bad_value(option, text, "too long");
    total += count * kUnits[unit].seconds;
    next_unit = unit + 1;
    p = after + 1;
  }
  return std::chrono::seconds(total);
}

double parse_fraction(std::string_view text, std::string_view option) {
  constexpr const char* kForm = "give a percentage (10%) or a fraction (0.1) above 0 and at most 1";
  const bool percent = text.ends_with('%');
  std::string_view number = percent ? text.substr(0, text.size() - 1) : text;
  double value = 0;
  auto [after, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || after != number.data() + number.size()) bad_value(option, text, kForm);
  if (percent) value /= 100;
  if (!(value > 0 && value <= 1)) {
    bad_value(option, text, !percent && value > 1 && value <= 100 ? "did you mean " + std::string(text) + "%?" : kForm);
  }
  return value;
}

}  // namespace keel::cli
