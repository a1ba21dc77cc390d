// CPU time by stage of the backup and restore data paths, each stage timed on the clock
// of the thread that runs it (CLOCK_THREAD_CPUTIME_ID): other processes on
// the machine do not count, and waiting does not either. What no stage
// claims (walking directories, trees, start-up with the key derivation,
// allocator and kernel work outside the timed calls) is the process's CPU
// time minus their sum.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace keel::engine {

enum class Stage : size_t {
  kRead,      // reading source files (pread, page-cache copies)
  kChunk,     // finding cut points, handing chunks to the workers
  kHash,      // the file checksum (XXH3) and chunk ids (HMAC-SHA-256)
  kCompress,  // zstd, with its sampling probe
  kEncrypt,   // AES-256-GCM
  kWrite,     // appending to packs, uploading parts, committing packs and their index entries
  kCatalog,   // saving the snapshot and the catalog copy
  // restore
  kDecrypt,     // AES-256-GCM
  kDecompress,  // zstd
  kVerify,      // the restored files' checksums (XXH3-128), reading back what arrived early
};
inline constexpr size_t kStageCount = 10;
const char* stage_name(Stage stage);

// The stages each command accounts, in the order its report lists them.
// Restore's kRead is fetching pack ranges with each blob's checksum, its
// kWrite creating, writing, finishing and renaming the restored files.
inline constexpr std::array kBackupStages{Stage::kRead,     Stage::kChunk,   Stage::kHash,   Stage::kCompress,
                                          Stage::kEncrypt,  Stage::kWrite,   Stage::kCatalog};
inline constexpr std::array kRestoreStages{Stage::kRead, Stage::kDecrypt, Stage::kDecompress, Stage::kVerify,
                                           Stage::kWrite};

// This thread's CPU time so far, in nanoseconds: a system call (no vDSO path
// for thread clocks; about 1-5 us on the development VM).
int64_t thread_cpu_ns();
// As thread_cpu_ns(), but the thread's previous reading when that was taken
// less than kRecentReading of wall time ago (a user-space clock read): a
// scope that starts as the previous one ends (restore opens, verifies and
// writes each blob in timed scopes back to back) then costs one system call,
// not two, and is charged at most kRecentReading more than it used.
inline constexpr int64_t kRecentReading = 2000;  // ns
int64_t recent_thread_cpu_ns();
// The process's CPU time (user + system) so far, in seconds.
double process_cpu_seconds();

class StageCpu {
 public:
  void add(Stage stage, int64_t ns) { ns_[static_cast<size_t>(stage)].fetch_add(ns, std::memory_order_relaxed); }
  double seconds(Stage stage) const { return static_cast<double>(ns_[static_cast<size_t>(stage)]) / 1e9; }
  std::array<double, kStageCount> all_seconds() const;  // by Stage

 private:
  std::array<std::atomic<int64_t>, kStageCount> ns_{};
};

// Adds the CPU time this thread spends in its scope to `stage` of `cpu`;
// with a null `cpu`, does nothing.
class StageTimer {
 public:
  StageTimer(StageCpu* cpu, Stage stage) : cpu_(cpu), stage_(stage), start_(cpu ? recent_thread_cpu_ns() : 0) {}
  ~StageTimer() {
    if (cpu_) cpu_->add(stage_, thread_cpu_ns() - start_);
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  StageCpu* cpu_;
  Stage stage_;
  int64_t start_;
};

}  // namespace keel::engine
