#include "agents/owner_names.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace keel::agents {
namespace {

// Calls a getpwuid_r-style lookup, growing the buffer while it is too small.
// `lookup(buffer, size, &result)` returns 0 or an errno value.
template <typename Lookup>
std::string lookup_name(long size_hint, Lookup lookup) {
  std::vector<char> buffer(size_hint > 0 ? static_cast<size_t>(size_hint) : 1024);
  for (;;) {
    const char* name = nullptr;
    int rc = lookup(buffer.data(), buffer.size(), &name);
    if (rc == ERANGE) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    return rc == 0 && name != nullptr ? std::string(name) : std::string();
  }
}

}  // namespace

const std::string& OwnerNames::user(uint32_t uid) {
  auto it = users_.find(uid);
  if (it != users_.end()) return it->second;
  std::string name = lookup_name(sysconf(_SC_GETPW_R_SIZE_MAX), [uid](char* buf, size_t size, const char** out) {
    struct passwd entry;
    struct passwd* found = nullptr;
    int rc = getpwuid_r(uid, &entry, buf, size, &found);
    if (rc == 0 && found != nullptr) *out = found->pw_name;
    return rc;
  });
  return users_.emplace(uid, std::move(name)).first->second;
}

const std::string& OwnerNames::group(uint32_t gid) {
  auto it = groups_.find(gid);
  if (it != groups_.end()) return it->second;
  std::string name = lookup_name(sysconf(_SC_GETGR_R_SIZE_MAX), [gid](char* buf, size_t size, const char** out) {
    struct group entry;
    struct group* found = nullptr;
    int rc = getgrgid_r(gid, &entry, buf, size, &found);
    if (rc == 0 && found != nullptr) *out = found->gr_name;
    return rc;
  });
  return groups_.emplace(gid, std::move(name)).first->second;
}

}  // namespace keel::agents
