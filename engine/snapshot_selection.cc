#include "engine/snapshot_selection.h"

#include <algorithm>

namespace keel::engine {
namespace {

bool contains(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

bool SnapshotSelection::matches(const catalog::SnapshotRecord& s) const {
  if (!hosts.empty() && !contains(hosts, s.host)) return false;
  for (const std::string& tag : tags) {
    if (!contains(s.tags, tag)) return false;
  }
  for (const std::string& path : paths) {
    if (!contains(s.paths, path)) return false;
  }
  if (since_ns && s.time_ns < *since_ns) return false;
  if (until_ns && s.time_ns >= *until_ns) return false;
  return true;
}

}  // namespace keel::engine
