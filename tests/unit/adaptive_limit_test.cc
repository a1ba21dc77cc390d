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

// One measurement window of 120 ms in which two rounds of reads (twice the
// limit) moved `bytes` in all.
void window(AdaptiveLimit& limit, uint64_t bytes) {
  *fake.now += std::chrono::milliseconds(120);
  const size_t reads = 2 * limit.limit();
  for (size_t i = 0; i < reads; ++i) {
    limit.acquire();
    limit.release(bytes / reads);
  }
}
}  // namespace

TEST_CASE("adaptive limit grows while throughput grows and stops at the max", "[adaptive]") {
  AdaptiveLimit limit = make_limit(2, 10);
  window(limit, 1 << 20);  // the first window measures the start and tries a step
  CHECK(limit.limit() == 3);
  for (int i = 1; i < 10; ++i) window(limit, uint64_t{1} << (20 + i));
  CHECK(limit.limit() == 10);
  CHECK(limit.peak_limit() == 10);
}

TEST_CASE("adaptive limit takes back a step that does not raise throughput", "[adaptive]") {
  AdaptiveLimit limit = make_limit(4, 32);
  window(limit, 8 << 20);
  CHECK(limit.limit() == 6);   // on trial
  window(limit, 16 << 20);     // paid: kept, and the next step tried
  CHECK(limit.limit() == 9);
  window(limit, 16 << 20);     // flat: back to 6
  CHECK(limit.limit() == 6);
  for (int i = 0; i < 10; ++i) window(limit, 16 << 20);
  CHECK(limit.limit() == 6);   // and held there
  CHECK(limit.peak_limit() == 9);
}

TEST_CASE("adaptive limit does not grow on noise alone", "[adaptive]") {
  // Throughput that jitters by 20% around a flat level (a loaded machine's
  // noise): each trial step is taken back, so the limit stays where it started.
  AdaptiveLimit limit = make_limit(4, 32);
  for (int i = 0; i < 200; ++i) window(limit, i % 2 ? 20 << 20 : 24 << 20);
  CHECK(limit.limit() <= 6);
  CHECK(limit.peak_limit() == 6);
}

TEST_CASE("adaptive limit tries again after holding", "[adaptive]") {
  AdaptiveLimit limit = make_limit(4, 32);
  window(limit, 8 << 20);
  window(limit, 8 << 20);  // the step to 6 did not pay
  CHECK(limit.limit() == 4);
  int windows = 0;
  while (limit.limit() == 4 && windows < 100) {
    window(limit, 8 << 20);
    ++windows;
  }
  CHECK(limit.limit() == 6);  // a new trial
  CHECK(windows > 10);
  window(limit, 32 << 20);  // the target got faster: the step is kept
  CHECK(limit.limit() == 9);
}

TEST_CASE("adaptive limit waits for a round of reads before judging", "[adaptive]") {
  AdaptiveLimit limit = make_limit(4, 32);
  *fake.now += std::chrono::milliseconds(500);
  limit.acquire();
  limit.release(64 << 20);  // one read of eight: no verdict yet however long it took
  CHECK(limit.limit() == 4);
  for (int i = 0; i < 6; ++i) {
    limit.acquire();
    limit.release(1 << 20);
  }
  CHECK(limit.limit() == 4);
  for (int i = 0; i < 1; ++i) {
    limit.acquire();
    limit.release(1 << 20);
  }
  CHECK(limit.limit() == 6);
}

TEST_CASE("adaptive limit halves when the target throttles", "[adaptive]") {
  std::atomic<uint64_t> retries{0};
  AdaptiveLimit limit = make_limit(8, 32, [&] { return retries.load(); });
  window(limit, 1 << 20);
  CHECK(limit.limit() == 12);
  retries = 3;
  window(limit, 4 << 20);
  CHECK(limit.limit() == 6);
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
