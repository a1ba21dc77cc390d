// The catalog's snapshots and the plaintext bodies of their trees, so that
// listing and restore planning need no round trip to the target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/bytes.h"
#include "util/id.h"

namespace keel::catalog {

struct SnapshotStats {
  uint64_t files = 0;
  uint64_t dirs = 0;
  uint64_t bytes = 0;          // logical bytes of the files in the snapshot
  uint64_t bytes_read = 0;     // bytes read from the source (changed files)
  uint64_t bytes_added = 0;    // bytes stored on the target by this backup
  uint64_t chunks_added = 0;
  uint64_t errors = 0;         // items skipped
  int64_t duration_ms = 0;
};

struct SnapshotRecord {
  Id id;
  int64_t time_ns = 0;  // Unix time the backup started
  std::string host;
  std::string username;
  std::vector<std::string> paths;
  std::vector<std::string> tags;
  std::optional<Id> parent;
  Id root;  // root tree
  SnapshotStats stats;
};

class SnapshotIndex {
 public:
  virtual ~SnapshotIndex() = default;

  // Directory trees as the engine serialized them (plaintext).
  virtual void put_tree(const Id& id, ByteView body) = 0;
  virtual std::optional<Bytes> get_tree(const Id& id) = 0;

  virtual void add_snapshot(const SnapshotRecord& snapshot) = 0;  // replaces one with the same id
  virtual std::optional<SnapshotRecord> get_snapshot(const Id& id) = 0;
  virtual std::vector<SnapshotRecord> list_snapshots() = 0;  // oldest first
  virtual void remove_snapshot(const Id& id) = 0;
};

}  // namespace keel::catalog
