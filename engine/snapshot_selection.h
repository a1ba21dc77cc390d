// Which snapshots a command works on (forget, copy): every filter given
// must match.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "catalog/snapshot_index.h"

namespace keel::engine {

struct SnapshotSelection {
  std::vector<std::string> hosts;  // the snapshot's host is one of these
  std::vector<std::string> tags;   // the snapshot has all of these; "job:NAME" selects one job's snapshots
  std::vector<std::string> paths;  // the snapshot's paths include all of these
  std::optional<int64_t> since_ns;  // taken at or after this time (Unix ns)
  std::optional<int64_t> until_ns;  // taken before this time (Unix ns)

  bool matches(const catalog::SnapshotRecord& snapshot) const;
};

}  // namespace keel::engine
