#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "engine/adaptive_limit.h"

using keel::engine::AdaptiveLimit;

namespace {
// Simulated time, so a loaded machine's late wake-ups cannot look like a
// change in throughput.
struct FakeClock {
  std::shared_ptr<std::chrono::steady_clock::time_point> now =
      std::make_shared<std::chrono::steady_clock::time_point>();
  AdaptiveLimit::Clock clock() const {
    return [now = now] { return *now; };
  }
};
FakeClock fake;

AdaptiveLimit make_limit(size_t initial, size_t max, std::function<uint64_t()> throttle = {}) {
  return AdaptiveLimit(initial, max, std::move(throttle), fake.clock());
}

// One measurement window of 120 ms in which `bytes` were read.
void window(AdaptiveLimit& limit, uint64_t bytes) {
  *fake.now += std::chrono::milliseconds(120);
  limit.acquire();
  limit.release(bytes);
}
}  // namespace

TEST_CASE("adaptive limit grows while throughput grows and stops at the max", "[adaptive]") {
  AdaptiveLimit limit = make_limit(2, 10);
  window(limit, 0);  // first window sets the baseline
  size_t before = limit.limit();
  window(limit, 1 << 20);
  CHECK(limit.limit() > before);
  for (int i = 2; i < 10; ++i) window(limit, uint64_t{1} << (20 + i));
  CHECK(limit.limit() == 10);
  CHECK(limit.peak_limit() == 10);
}

TEST_CASE("adaptive limit holds when throughput stops growing", "[adaptive]") {
  AdaptiveLimit limit = make_limit(4, 32);
  window(limit, 0);
  window(limit, 8 << 20);
  size_t grown = limit.limit();
  window(limit, 8 << 20);  // flat
  window(limit, 8 << 20);
  CHECK(limit.limit() == grown);
}

TEST_CASE("adaptive limit halves when the target throttles", "[adaptive]") {
  std::atomic<uint64_t> retries{0};
  AdaptiveLimit limit = make_limit(8, 32, [&] { return retries.load(); });
  window(limit, 0);
  retries = 3;
  window(limit, 1 << 20);
  CHECK(limit.limit() == 4);
}

TEST_CASE("adaptive limit blocks beyond the limit", "[adaptive]") {
  AdaptiveLimit limit(1, 1);
  limit.acquire();
  std::atomic<bool> entered{false};
  std::thread t([&] {
    limit.acquire();
    entered = true;
    limit.release(0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(entered);
  limit.release(0);
  t.join();
  CHECK(entered);
}
