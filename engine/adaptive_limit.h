// How many ranged reads a restore keeps in flight: starts low and climbs a
// step at a time while each step raises the measured throughput; a step that
// does not is taken back, and the target's throttling (retries) halves the
// limit. So one setting suits a local disk, a LAN S3 server and a distant
// cloud bucket alike, and no more reads run than pay for themselves: on two
// cores shared with the S3 server, 16 ranges of 16 MiB in flight instead of 4
// cost a restore 50% more CPU and 60% more time (docs/performance.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace keel::engine {

class AdaptiveLimit {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `throttle_events` returns a counter that grows when the target pushes
  // back (e.g. S3 retries); may be empty. `now` is for tests.
  AdaptiveLimit(size_t initial, size_t max, std::function<uint64_t()> throttle_events = {},
                Clock now = std::chrono::steady_clock::now);

  void acquire();                 // blocks while `limit` readers are active
  void release(uint64_t bytes);   // one read of `bytes` finished
  size_t limit();
  size_t peak_limit();

 private:
  void adjust(std::chrono::steady_clock::time_point now);  // under mu_

  std::mutex mu_;
  std::condition_variable room_;
  size_t active_ = 0;
  size_t limit_;
  size_t max_;
  size_t peak_;
  std::function<uint64_t()> throttle_events_;
  Clock now_;
  uint64_t last_throttle_ = 0;
  // The measurement window: at least 100 ms long and two rounds of reads
  // (twice `limit_`).
  std::chrono::steady_clock::time_point window_start_;
  uint64_t window_bytes_ = 0;
  size_t window_reads_ = 0;
  // The limit the climb stands on and the throughput measured there; while
  // limit_ is above it, the step above is on trial.
  size_t settled_ = 0;
  double settled_rate_ = 0;
  bool measured_ = false;   // settled_rate_ holds a measurement
  size_t hold_windows_ = 0;  // windows to wait before trying a step again
};

}  // namespace keel::engine
