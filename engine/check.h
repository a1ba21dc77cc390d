// Verifies a repository: every snapshot's trees and chunks are indexed, every
// indexed pack is on the target at its size, and with read_data every stored
// byte matches its XXH3 checksum (no keys needed for that part) and every pack
// header authenticates. Damage is reported with the packs and files it hits.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/repository.h"

namespace keel::engine {

struct CheckOptions {
  bool read_data = false;
  size_t readers = 4;
  const std::atomic<bool>* cancel = nullptr;
};

struct CheckProblem {
  std::string message;                 // what is wrong, and where
  std::vector<std::string> affected;   // "<snapshot short id>:<path>" of files that need it
};

struct CheckResult {
  uint64_t snapshots = 0;
  uint64_t trees = 0;
  uint64_t packs = 0;
  uint64_t blobs_referenced = 0;
  uint64_t bytes_read = 0;
  std::vector<CheckProblem> problems;
};

CheckResult run_check(Repository& repo, const CheckOptions& options,
                      const std::function<void(uint64_t packs_done, uint64_t packs_total)>& on_progress = {});

}  // namespace keel::engine
