#include "engine/stage_clock.h"

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

using keel::engine::Stage;
using keel::engine::StageClock;
using keel::engine::StageCpu;
using keel::engine::thread_cpu_ns;

namespace {

// Burns `ns` of this thread's CPU time.
void spin(int64_t ns) {
  const int64_t until = thread_cpu_ns() + ns;
  volatile uint64_t sink = 0;
  while (thread_cpu_ns() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
}

int64_t ns_of(const StageCpu& cpu, Stage stage) { return static_cast<int64_t>(cpu.seconds(stage) * 1e9); }

constexpr int64_t kMs = 1000000;

}  // namespace

TEST_CASE("stage clock shares exactly the thread's CPU time among its laps", "[stage_clock]") {
  StageCpu cpu;
  const int64_t before = thread_cpu_ns();
  {
    StageClock clock(&cpu);
    spin(3 * kMs);
    clock.lap(Stage::kRead);
    spin(3 * kMs);
    clock.lap(Stage::kHash);
  }
  const int64_t spent = thread_cpu_ns() - before;
  const int64_t charged = ns_of(cpu, Stage::kRead) + ns_of(cpu, Stage::kHash);
  CHECK(charged <= spent);
  CHECK(charged >= spent - kMs);  // only the clock's own reads fall outside
  CHECK(ns_of(cpu, Stage::kRead) > 0);
  CHECK(ns_of(cpu, Stage::kHash) > 0);
}

TEST_CASE("stage clock reads the CPU clock again once its flush interval has passed", "[stage_clock]") {
  StageCpu cpu;
  StageClock clock(&cpu);
  spin(2 * std::chrono::duration_cast<std::chrono::nanoseconds>(StageClock::kFlushEvery).count());
  clock.lap(Stage::kRead);  // at least as much wall time as CPU time passed
  CHECK(ns_of(cpu, Stage::kRead) > 0);
}

// Each section keeps its laps within one flush interval (kFlushEvery, 2 ms)
// until the wait, so one flush shares the CPU among them.
TEST_CASE("stage clock gives waiting no weight and unclaimed work no stage", "[stage_clock]") {
  SECTION("a skipped wait does not dilute the stage before it") {
    StageCpu cpu;
    const int64_t before = thread_cpu_ns();
    {
      StageClock clock(&cpu);
      spin(kMs / 2);
      clock.lap(Stage::kCompress);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      clock.skip();
      clock.unclaimed();  // microseconds of weight; flushes
    }
    const int64_t spent = thread_cpu_ns() - before;
    // Had the sleep weighed as unclaimed, compress would get a fraction of it.
    CHECK(ns_of(cpu, Stage::kCompress) >= spent * 9 / 10);
  }
  SECTION("unclaimed work is charged to no stage") {
    StageCpu cpu;
    const int64_t before = thread_cpu_ns();
    {
      StageClock clock(&cpu);
      spin(kMs / 2);
      clock.unclaimed();
      clock.lap(Stage::kWrite);  // microseconds of weight
    }
    const int64_t spent = thread_cpu_ns() - before;
    CHECK(ns_of(cpu, Stage::kWrite) < spent / 10);
  }
}

TEST_CASE("a timed scope that starts as another ends reuses its reading", "[stage_clock]") {
  using keel::engine::kRecentReading;
  using keel::engine::recent_thread_cpu_ns;
  using keel::engine::StageTimer;
  // No system call when the reading is nanoseconds old. A preemption between the two calls makes
  // it stale (it failed so once under ASan on the loaded CI machine), so of many tries some must
  // see the reading reused.
  bool reused = false;
  for (int attempt = 0; attempt < 1000 && !reused; ++attempt) {
    const int64_t fresh = thread_cpu_ns();
    reused = recent_thread_cpu_ns() == fresh;
  }
  CHECK(reused);
  const int64_t read = thread_cpu_ns();
  std::this_thread::sleep_for(std::chrono::nanoseconds(10 * kRecentReading));
  spin(kMs);
  CHECK(recent_thread_cpu_ns() >= read + kMs);  // stale: read again
  // Back-to-back scopes still charge each its own work, give or take kRecentReading.
  StageCpu cpu;
  {
    StageTimer first(&cpu, Stage::kDecrypt);
    spin(2 * kMs);
  }
  {
    StageTimer second(&cpu, Stage::kVerify);
    spin(3 * kMs);
  }
  CHECK(ns_of(cpu, Stage::kDecrypt) >= 2 * kMs);
  CHECK(ns_of(cpu, Stage::kDecrypt) < 2 * kMs + kMs / 2);
  CHECK(ns_of(cpu, Stage::kVerify) >= 3 * kMs);
  CHECK(ns_of(cpu, Stage::kVerify) < 3 * kMs + kMs / 2);
}
