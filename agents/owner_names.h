// User and group names for numeric ids, so a restore on another host can map
// owners by name. Lookups go through NSS once per id and are cached.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace keel::agents {

class OwnerNames {
 public:
  // The name of the id, or "" when the system knows none.
  const std::string& user(uint32_t uid);
  const std::string& group(uint32_t gid);

 private:
  std::unordered_map<uint32_t, std::string> users_;
  std::unordered_map<uint32_t, std::string> groups_;
};

}  // namespace keel::agents
