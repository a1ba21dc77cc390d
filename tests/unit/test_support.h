// Helpers the unit tests share: scratch directories (temp_dir.h), UTC times
// and reproducible random bytes.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>

#include "util/bytes.h"

#include "tests/unit/temp_dir.h"

namespace keel::test {

// `n` bytes from a generator seeded with `seed`: the same every run.
inline Bytes random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// "2024-03-31T01:00" or "2024-03-31T01:00:30", in UTC.
inline std::chrono::system_clock::time_point utc(const char* text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  REQUIRE(std::sscanf(text, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s) >= 5);
  using namespace std::chrono;
  sys_days day = year(y) / month(static_cast<unsigned>(mo)) / d;
  return system_clock::time_point(day + hours(h) + minutes(mi) + seconds(s));
}

// "2024-03-31T01:00" (UTC, to the minute).
inline std::string iso_minute(std::chrono::system_clock::time_point t) {
  time_t secs = std::chrono::system_clock::to_time_t(t);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M", &tm);
  return buf;
}

}  // namespace keel::test
