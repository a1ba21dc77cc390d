#include "gateway/http_date.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <string_view>

namespace keel::gateway {

namespace {

// RFC 850 ("Tuesday, 14-Nov-23 22:13:20 GMT") and asctime ("Tue Nov 14
// 22:13:20 2023"), which HTTP/1.1 recipients must still accept.
std::time_t parse_obsolete_http_date(const std::string& text) {
  for (const char* format : {"%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    const char* rest = strptime(text.c_str(), format, &tm);
    if (rest && *rest == '\0') return timegm(&tm);
  }
  return -1;
}

std::time_t parse_rfc1123_date(const std::string& text) {
  static constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                               "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  // "Tue, 27 Mar 2007 19:36:42 +0000": fixed positions after the weekday's comma.
  const size_t comma = text.find(", ");
  if (comma == std::string::npos) return -1;
  const std::string_view rest = std::string_view(text).substr(comma + 2);
  if (rest.size() < 24 || rest[2] != ' ' || rest[6] != ' ' || rest[11] != ' ' || rest[14] != ':' ||
      rest[17] != ':' || rest[20] != ' ') {
    return -1;
  }
  const std::string_view zone = rest.substr(21);
  // "-0000" is RFC 5322's UTC of unknown local offset: what Python's email.utils.formatdate()
  // writes, so botocore's SigV4 sends it in Date when a caller set a Date header.
  if (zone != "GMT" && zone != "+0000" && zone != "-0000" && zone != "UTC" && zone != "Z") return -1;
  const auto number = [&](size_t at, size_t length) {
    int value = 0;
    for (size_t i = at; i < at + length; ++i) {
      if (rest[i] < '0' || rest[i] > '9') return -1;
      value = value * 10 + (rest[i] - '0');
    }
    return value;
  };
  const auto month = std::find(kMonths.begin(), kMonths.end(), rest.substr(3, 3));
  std::tm tm{};
  tm.tm_mday = number(0, 2);
  tm.tm_mon = static_cast<int>(month - kMonths.begin());
  tm.tm_year = number(7, 4) - 1900;
  tm.tm_hour = number(12, 2);
  tm.tm_min = number(15, 2);
  tm.tm_sec = number(18, 2);
  if (month == kMonths.end() || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_year < 0 || tm.tm_hour < 0 ||
      tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 || tm.tm_sec > 60) {
    return -1;
  }
  return timegm(&tm);
}

}  // namespace

std::time_t parse_http_date(const std::string& text) {
  const std::time_t seconds = parse_rfc1123_date(text);
  return seconds >= 0 ? seconds : parse_obsolete_http_date(text);
}

}  // namespace keel::gateway
