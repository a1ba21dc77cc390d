#include "cli/format.h"

#include <cstdio>
#include <ctime>

namespace keel::cli {

std::string human_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string human_rate(double bps) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB/s", bps / 1e6);
  return buf;
}

std::string human_duration(double seconds) {
  char buf[32];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.2fs", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
  } else {
    int s = static_cast<int>(seconds);
    std::snprintf(buf, sizeof buf, "%dh%02dm%02ds", s / 3600, s / 60 % 60, s % 60);
  }
  return buf;
}

std::string local_time(int64_t unix_ns) {
  time_t t = static_cast<time_t>(unix_ns / 1000000000);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string iso_time(int64_t unix_ns) {
  time_t t = static_cast<time_t>(unix_ns / 1000000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(unix_ns / 1000000 % 1000));
  return buf;
}

std::string comma_joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

}  // namespace keel::cli
