// Time for the scheduler: an interface, so tests can drive a simulated
// clock, and conversions to the Unix nanoseconds the databases store.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace keel::jobs {

using TimePoint = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() = 0;
  // Returns once `until` has come (true) or as soon as `cancel` is set
  // (false).
  virtual bool sleep_until(TimePoint until, const std::atomic<bool>& cancel) = 0;
};

// The system's wall clock; notices `cancel` within kCancelLatency.
class SystemClock final : public Clock {
 public:
  static constexpr std::chrono::milliseconds kCancelLatency{100};
  TimePoint now() override { return std::chrono::system_clock::now(); }
  bool sleep_until(TimePoint until, const std::atomic<bool>& cancel) override;
};

inline int64_t to_unix_ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline TimePoint from_unix_ns(int64_t ns) {
  return TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::nanoseconds(ns)));
}

}  // namespace keel::jobs
