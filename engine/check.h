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
  // Blobs held by more than one pack (concurrent writers, a repack in its
  // grace period): information, not a problem; prune reclaims the copies.
  uint64_t blobs_stored_more_than_once = 0;
  std::vector<CheckProblem> problems;
};

// An object on the target that does not authenticate.
struct DamagedObject {
  std::string key;     // on the target
  std::string reason;  // what is wrong with it
};

// Reads and authenticates every snapshot record (snapshots/) and key slot
// (keys/) on the target; returns those that fail.
std::vector<DamagedObject> find_damaged_records(Repository& repo);

CheckResult run_check(Repository& repo, const CheckOptions& options,
                      const std::function<void(uint64_t packs_done, uint64_t packs_total)>& on_progress = {});

}  // namespace keel::engine
