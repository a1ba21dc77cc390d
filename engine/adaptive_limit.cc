#include "engine/adaptive_limit.h"

#include <algorithm>

namespace keel::engine {
namespace {
// Long enough to average a few reads, short enough to ramp up in a second.
constexpr auto kWindow = std::chrono::milliseconds(100);
// Growth must beat noise to count as growth.
constexpr double kGain = 1.10;
}  // namespace

AdaptiveLimit::AdaptiveLimit(size_t initial, size_t max, std::function<uint64_t()> throttle_events, Clock now)
    : limit_(std::clamp<size_t>(initial, 1, std::max<size_t>(1, max))),
      max_(std::max<size_t>(1, max)),
      peak_(limit_),
      throttle_events_(std::move(throttle_events)),
      now_(std::move(now)),
      window_start_(now_()) {
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
    auto now = now_();
    if (now - window_start_ >= kWindow) adjust(now);
  }
  room_.notify_all();
}

void AdaptiveLimit::adjust(std::chrono::steady_clock::time_point now) {
  double seconds = std::chrono::duration<double>(now - window_start_).count();
  double rate = static_cast<double>(window_bytes_) / seconds;
  uint64_t throttles = throttle_events_ ? throttle_events_() : 0;
  if (throttles > last_throttle_) {
    limit_ = std::max<size_t>(1, limit_ / 2);  // the target asked us to slow down
  } else if (rate > last_rate_ * kGain && limit_ < max_) {
    limit_ = std::min(max_, limit_ + std::max<size_t>(1, limit_ / 2));
  }
  peak_ = std::max(peak_, limit_);
  last_throttle_ = throttles;
  last_rate_ = rate;
  window_start_ = now;
  window_bytes_ = 0;
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
