#include "engine/stage_cpu.h"

#include <sys/resource.h>

#include <cstdint>
#include <ctime>

namespace keel::engine {

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kRead: return "read";
    case Stage::kChunk: return "chunk";
    case Stage::kHash: return "hash";
    case Stage::kCompress: return "compress";
    case Stage::kEncrypt: return "encrypt";
    case Stage::kWrite: return "write";
    case Stage::kCatalog: return "catalog";
    case Stage::kDecrypt: return "decrypt";
    case Stage::kDecompress: return "decompress";
    case Stage::kVerify: return "verify";
  }
  return "?";
}

namespace {

int64_t ns_of(const timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec; }

int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return ns_of(ts);
}

// This thread's latest thread_cpu_ns() and the monotonic time it was taken.
struct Reading {
  int64_t cpu = 0;
  int64_t at = INT64_MIN / 2;
};
thread_local Reading latest;

}  // namespace

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  latest = {ns_of(ts), monotonic_ns()};
  return latest.cpu;
}

int64_t recent_thread_cpu_ns() {
  if (monotonic_ns() - latest.at < kRecentReading) return latest.cpu;
  return thread_cpu_ns();
}

double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::array<double, kStageCount> StageCpu::all_seconds() const {
  std::array<double, kStageCount> out{};
  for (size_t s = 0; s < kStageCount; ++s) out[s] = seconds(Stage(s));
  return out;
}

}  // namespace keel::engine
