// Where the gateway keeps access control set through the API: per bucket its
// ACL, policy, ownership controls and public access block, and per object
// version its ACL, in <state_dir>/access.db (SQLite, apart from gateway.db so
// that the object metadata schema does not change). An object ACL belongs to
// the version written at `modified_ns`: a later write of the same version id
// (the null version) starts again from the default (private).
// Not thread-safe: the caller serialises access.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace keel::gateway {

class AccessStore {
 public:
  explicit AccessStore(const std::string& path);
  ~AccessStore();
  AccessStore(const AccessStore&) = delete;
  AccessStore& operator=(const AccessStore&) = delete;

  // A bucket's setting ("acl", "policy", "ownership", "public_access_block", "cors",
  // "encryption"), "" when unset.
  std::string setting(const std::string& bucket, const std::string& name);
  // An empty value removes the setting.
  void set_setting(const std::string& bucket, const std::string& name, const std::string& value);
  // Forgets everything about a deleted bucket.
  void drop_bucket(const std::string& bucket);

  // The encoded ACL of the version written at modified_ns; nullopt: the default.
  std::optional<std::string> object_acl(const std::string& bucket, const std::string& key,
                                        const std::string& version_id, int64_t modified_ns);
  void set_object_acl(const std::string& bucket, const std::string& key, const std::string& version_id,
                      int64_t modified_ns, const std::string& acl);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::gateway
