// A lap clock over the stages of stage_cpu.h.
#pragma once

#include <cstdint>

#include "engine/stage_cpu.h"

namespace keel::engine {

// Charges a thread's consecutive stages with one clock read per stage: each
// lap() gives the CPU time since the previous lap (or the construction) to
// its stage. The thread clock is a system call (about 5 us on the development
// VM, no vDSO for it), and a small file passes through five stages, so timing
// each with a StageTimer (two reads) cost more than reading it did.
// With a null `cpu`, does nothing.
class StageClock {
 public:
  explicit StageClock(StageCpu* cpu) : cpu_(cpu), last_(cpu ? thread_cpu_ns() : 0) {}
  void lap(Stage stage) {
    if (!cpu_) return;
    const int64_t now = thread_cpu_ns();
    cpu_->add(stage, now - last_);
    last_ = now;
  }

 private:
  StageCpu* cpu_;
  int64_t last_;
};

}  // namespace keel::engine
