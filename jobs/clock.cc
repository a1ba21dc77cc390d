#include "jobs/clock.h"

#include <algorithm>
#include <thread>

namespace keel::jobs {

bool SystemClock::sleep_until(TimePoint until, const std::atomic<bool>& cancel) {
  // Signal handlers can only set a flag, so the wait is sliced to see it.
  while (!cancel.load()) {
    TimePoint now = this->now();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::min<TimePoint::duration>(until - now, kCancelLatency));
  }
  return false;
}

}  // namespace keel::jobs
