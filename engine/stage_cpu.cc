#include "engine/stage_cpu.h"

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
  }
  return "?";
}

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace keel::engine
