// The versions of a repository's objects in a versioned bucket (S3 with
// versioning or Object Lock): what an administrator's `keel repair --undelete`
// works on (engine/undelete.h). Kept apart from the Target seam: the data
// path never sees a version, and a target without versions (a local
// directory) has no VersionedStore at all (targets/open_versioned_store.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace keel::targets {

// One version of an object: a body, or a delete marker that hides the versions below it.
struct ObjectVersion {
  std::string key;  // relative to the repository, as Target keys are
  std::string version_id;
  bool delete_marker = false;
  bool latest = false;  // the current version (what reads see, unless a marker)
  uint64_t size = 0;
  int64_t modified_unix = 0;
};

class VersionedStore {
 public:
  virtual ~VersionedStore() = default;
  // For messages: "s3://bucket/prefix".
  virtual std::string describe() const = 0;
  // Calls `fn` for every version and delete marker of the keys starting with
  // `prefix`, each key's newest first (S3 ListObjectVersions).
  virtual void list_versions(const std::string& prefix, const std::function<void(const ObjectVersion&)>& fn) = 0;
  // Reads [offset, offset + out.size()) of one version; returns the bytes
  // read, fewer only where it ends. Throws Error(kNotFound) if it is gone.
  virtual size_t get_version_range(const std::string& key, const std::string& version_id, uint64_t offset,
                                   std::span<uint8_t> out) = 0;
  // Deletes one version or delete marker for good (DeleteObject with
  // versionId); one already gone is no error. The store refuses a version
  // under retention (Error kTargetIo), one in GOVERNANCE mode accepted with
  // `bypass_governance` where the credentials may bypass it.
  virtual void remove_version(const std::string& key, const std::string& version_id, bool bypass_governance) = 0;
};

}  // namespace keel::targets
