#include "engine/adaptive_limit.h"

#include <algorithm>

namespace keel::engine {
namespace {
// Long enough to average a few reads, short enough to ramp up in a second.
constexpr auto kWindow = std::chrono::milliseconds(100);
// A step must raise throughput by this much to be kept (a step adds half the
// readers: where latency bounds the rate, it gains up to 50%). Less is
// noise, which on a loaded machine easily reaches 10-20% between windows,
// and readers that do not add throughput only add memory and CPU.
constexpr double kGain = 1.25;
// Reads per window, per reader allowed: two rounds, so a window is not
// decided by the few reads that happened to finish in it.
constexpr size_t kRoundsPerWindow = 2;
// After a step was taken back, windows to wait before trying again (the
// target's speed may change during a long restore).
constexpr size_t kHoldWindows = 20;

size_t step_up(size_t limit, size_t max) { return std::min(max, limit + std::max<size_t>(1, limit / 2)); }
}  // namespace

AdaptiveLimit::AdaptiveLimit(size_t initial, size_t max, std::function<uint64_t()> throttle_events, Clock now)
    : limit_(std::clamp<size_t>(initial, 1, std::max<size_t>(1, max))),
      max_(std::max<size_t>(1, max)),
      peak_(limit_),
      throttle_events_(std::move(throttle_events)),
      now_(std::move(now)),
      window_start_(now_()),
      settled_(limit_) {
  if (throttle_events_) last_throttle_ = throttle_events_();
}

void AdaptiveLimit::acquire() {
  std::unique_lock lock(mu_);
  room_.wait(lock, [this] { return active_ < limit_; });
  ++active_;
}

void AdaptiveLimit::release(uint64_t bytes) {
  {
    std::lock_guard lock(mu_);
    --active_;
    window_bytes_ += bytes;
    ++window_reads_;
    auto now = now_();
    if (now - window_start_ >= kWindow && window_reads_ >= kRoundsPerWindow * limit_) adjust(now);
  }
  room_.notify_all();
}

void AdaptiveLimit::adjust(std::chrono::steady_clock::time_point now) {
  double seconds = std::chrono::duration<double>(now - window_start_).count();
  double rate = static_cast<double>(window_bytes_) / seconds;
  uint64_t throttles = throttle_events_ ? throttle_events_() : 0;
  if (throttles > last_throttle_) {
    // The target asked us to slow down.
    limit_ = std::max<size_t>(1, limit_ / 2);
    settled_ = limit_;
    measured_ = false;
    hold_windows_ = 0;
  } else if (limit_ > settled_) {
    // The step on trial: kept if it paid, else taken back for a while.
    if (rate > settled_rate_ * kGain) {
      settled_ = limit_;
      settled_rate_ = rate;
      limit_ = step_up(limit_, max_);
    } else {
      limit_ = settled_;
      hold_windows_ = kHoldWindows;
    }
  } else if (!measured_ || hold_windows_ == 0) {
    // On settled ground: measure it, then try the next step.
    settled_rate_ = rate;
    measured_ = true;
    limit_ = step_up(limit_, max_);
  } else {
    --hold_windows_;
    settled_rate_ = rate;
  }
  peak_ = std::max(peak_, limit_);
  last_throttle_ = throttles;
  window_start_ = now;
  window_bytes_ = 0;
  window_reads_ = 0;
}

size_t AdaptiveLimit::limit() {
  std::lock_guard lock(mu_);
  return limit_;
}

size_t AdaptiveLimit::peak_limit() {
  std::lock_guard lock(mu_);
  return peak_;
}

}  // namespace keel::engine
