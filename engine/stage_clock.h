// A lap clock over the stages of stage_cpu.h that reads the thread's CPU
// clock once per batch of laps, not once per lap.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "engine/stage_cpu.h"

namespace keel::engine {

// Charges a thread's consecutive stages: each lap() gives the time since the
// previous mark to its stage. The thread CPU clock is a system call (about
// 5 us on the development VM, no vDSO path) and a backup lapped it four times
// per small file and five times per chunk; the monotonic clock is read in
// user space (about 50 ns). So laps measure monotonic time, and flush() reads
// the thread CPU clock and shares the CPU time since the previous flush among
// the stages in proportion to their laps. lap() flushes by itself once
// kFlushEvery has passed, and the destructor flushes what is left.
//
// The CPU total is exact; the split is as exact as the laps are CPU: time a
// thread spends blocked (a full queue, a spent budget) must be skip()ped, or
// it would draw CPU time to the stage it interrupts. Preemption by other
// processes falls on all stages alike. unclaimed() marks work of no stage
// (walking directories): its share of the CPU is left to "other", which is
// the process's CPU time minus the stages'.
//
// Not thread-safe: one per thread. With a null `cpu`, does nothing.
class StageClock {
 public:
  using Mono = std::chrono::steady_clock;
  static constexpr Mono::duration kFlushEvery = std::chrono::milliseconds(2);

  explicit StageClock(StageCpu* cpu) : cpu_(cpu) {
    if (!cpu_) return;
    last_cpu_ = recent_thread_cpu_ns();
    last_flush_ = mark_ = Mono::now();
  }
  ~StageClock() { flush(); }
  StageClock(const StageClock&) = delete;
  StageClock& operator=(const StageClock&) = delete;

  void lap(Stage stage) {
    if (!cpu_) return;
    const Mono::time_point now = Mono::now();
    laps_[static_cast<size_t>(stage)] += now - mark_;
    advance(now);
  }
  // The time since the previous mark was no stage's work.
  void unclaimed() {
    if (!cpu_) return;
    const Mono::time_point now = Mono::now();
    unclaimed_ += now - mark_;
    advance(now);
  }
  // The time since the previous mark was spent waiting: it weighs nothing.
  void skip() {
    if (!cpu_) return;
    mark_ = Mono::now();
  }
  void flush() {
    if (!cpu_) return;
    const int64_t cpu_now = thread_cpu_ns();
    const int64_t spent = cpu_now - last_cpu_;
    Mono::duration total = unclaimed_;
    for (Mono::duration d : laps_) total += d;
    if (total.count() > 0) {
      for (size_t i = 0; i < kStageCount; ++i) {
        if (laps_[i].count() > 0) {
          cpu_->add(static_cast<Stage>(i), static_cast<int64_t>(static_cast<double>(spent) * laps_[i].count() /
                                                                static_cast<double>(total.count())));
        }
      }
    }
    laps_.fill(Mono::duration::zero());
    unclaimed_ = Mono::duration::zero();
    last_cpu_ = cpu_now;
    last_flush_ = mark_;
  }

 private:
  void advance(Mono::time_point now) {
    mark_ = now;
    if (now - last_flush_ >= kFlushEvery) flush();
  }

  StageCpu* cpu_;
  int64_t last_cpu_ = 0;
  Mono::time_point mark_{};
  Mono::time_point last_flush_{};
  std::array<Mono::duration, kStageCount> laps_{};
  Mono::duration unclaimed_{};
};

}  // namespace keel::engine
