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
#include <vector>

#include "targets/target.h"
#include "targets/versioned_store.h"

namespace keel::targets::memory {

class MemoryStore {
 public:
  // Committed objects by key. Those set are written now (their modified_unix).
  std::map<std::string, Bytes> objects() const;
  void set_objects(std::map<std::string, Bytes> objects);
  // Uploads started and neither committed nor aborted.
  size_t open_uploads() const;
  // Object Lock, as an administrator sees it: an object's retention, and one
  // set without S3's rules (a bypassed GOVERNANCE lock; tests move time so).
  std::optional<Retention> retention(const std::string& key) const;
  void set_retention(const std::string& key, std::optional<Retention> retention);
  // Versioned stores: how many versions and delete markers `key` has.
  size_t version_count(const std::string& key) const;

 private:
  friend class MemoryTarget;
  friend class MemoryUpload;
  friend class MemoryVersions;
  struct PendingUpload;
  mutable std::mutex mu_;
  std::map<std::string, Bytes> objects_;
  std::map<std::string, int64_t> modified_;  // when each of objects_ was written (Unix seconds)
  uint64_t next_upload_ = 1;
  std::map<uint64_t, std::shared_ptr<PendingUpload>> uploads_;
  std::map<std::string, Retention> retention_;
  // Versioned stores (MemoryTargetOptions::versioning): every version and
  // delete marker by key, newest first. objects_ and retention_ hold the
  // current one (the front, unless it is a marker) and are what counts for it.
  struct StoredVersion {
    std::string id;
    bool delete_marker = false;
    Bytes data;
    std::optional<Retention> retention;
    int64_t modified_unix = 0;
  };
  std::map<std::string, std::vector<StoredVersion>> versions_;
  uint64_t next_version_ = 1;
  // Called under mu_.
  void store(const std::string& key, Bytes data, const std::optional<Retention>& lock, bool versioned,
             const std::string& where);
  void erase(const std::string& key, bool versioned, const std::string& where);
  void remove_version(const std::string& key, const std::string& version_id, bool bypass_governance,
                      const std::string& where);
  void push_version(const std::string& key, StoredVersion version);
};

struct MemoryTargetOptions {
  std::string name = "memory";  // describe(): "memory:<name>"
  uint64_t min_part_size = 0;   // S3's 5 MiB to behave like it
  size_t read_concurrency = 0;
  // Behave as a bucket with Object Lock enabled: objects written under a
  // write retention are locked, a locked object can be neither removed nor
  // overwritten, its retention only extended.
  bool object_lock = false;
  // Keep every version as a versioned S3 bucket does: an overwrite or a
  // delete keeps what was there (a delete adds a delete marker), and with
  // object_lock a locked version stays while newer ones go on top of it.
  bool versioning = false;
};

std::unique_ptr<Target> open_memory_target(std::shared_ptr<MemoryStore> store, MemoryTargetOptions options = {});
// The versions a store written through targets with `versioning` keeps
// (none otherwise); describe(): "memory:<name>".
std::unique_ptr<VersionedStore> open_memory_versions(std::shared_ptr<MemoryStore> store, std::string name = "memory");

}  // namespace keel::targets::memory
