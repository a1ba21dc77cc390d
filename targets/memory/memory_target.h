// A target held in memory, for tests and the torture driver: thread-safe,
// an upload visible only once committed, stale uploads collected like a
// crashed run's. Several Target handles may share one store, as several
// processes share a directory or a bucket, and a store can be copied to
// start many runs from one state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "targets/target.h"

namespace keel::targets::memory {

class MemoryStore {
 public:
  // Committed objects by key.
  std::map<std::string, Bytes> objects() const;
  void set_objects(std::map<std::string, Bytes> objects);
  // Uploads started and neither committed nor aborted.
  size_t open_uploads() const;
  // Object Lock, as an administrator sees it: an object's retention, and one
  // set without S3's rules (a bypassed GOVERNANCE lock; tests move time so).
  std::optional<Retention> retention(const std::string& key) const;
  void set_retention(const std::string& key, std::optional<Retention> retention);

 private:
  friend class MemoryTarget;
  friend class MemoryUpload;
  struct PendingUpload;
  mutable std::mutex mu_;
  std::map<std::string, Bytes> objects_;
  uint64_t next_upload_ = 1;
  std::map<uint64_t, std::shared_ptr<PendingUpload>> uploads_;
  std::map<std::string, Retention> retention_;
};

struct MemoryTargetOptions {
  std::string name = "memory";  // describe(): "memory:<name>"
  uint64_t min_part_size = 0;   // S3's 5 MiB to behave like it
  size_t read_concurrency = 0;
  // Behave as a bucket with Object Lock enabled: objects written under a
  // write retention are locked, a locked object can be neither removed nor
  // overwritten, its retention only extended.
  bool object_lock = false;
};

std::unique_ptr<Target> open_memory_target(std::shared_ptr<MemoryStore> store, MemoryTargetOptions options = {});

}  // namespace keel::targets::memory
