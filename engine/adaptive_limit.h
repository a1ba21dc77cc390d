// How many ranged reads a restore keeps in flight: starts low, grows while
// the measured throughput keeps growing, and halves when the target signals
// throttling (retries), so one setting suits a local disk, a LAN S3 server
// and a distant cloud bucket alike.
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
  std::chrono::steady_clock::time_point window_start_;
  uint64_t window_bytes_ = 0;
  double last_rate_ = 0;
};

}  // namespace keel::engine
