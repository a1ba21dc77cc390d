// What changed between two snapshots (`keel diff`), from their trees in the
// catalog: subtrees with the same id are the same and are not descended into.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "engine/repository.h"

namespace keel::engine {

enum class ChangeKind {
  kAdded,     // only in the second snapshot
  kRemoved,   // only in the first
  kModified,  // a file's content differs (metadata may too)
  kMetadata,  // same content, other metadata (mode, owner, times, link target, xattrs)
  kType,      // the path names another kind of object (file -> directory ...)
};
const char* change_kind_name(ChangeKind kind);  // "added", "removed", ...

struct FileChange {
  std::string path;
  ChangeKind kind = ChangeKind::kAdded;
  NodeType type = NodeType::kFile;  // in the second snapshot; in the first for kRemoved
  uint64_t size_before = 0;         // 0 where there is no "before" (kAdded)
  uint64_t size_after = 0;          // 0 where there is no "after" (kRemoved)
  std::vector<std::string> metadata;  // what metadata differs: "mode", "owner", "mtime", "target", "xattrs", "device"
};

struct DiffSummary {
  uint64_t added = 0, removed = 0, modified = 0, metadata = 0, type = 0;
  uint64_t bytes_added = 0;    // sizes of added files, and growth of modified ones
  uint64_t bytes_removed = 0;  // sizes of removed files, and shrinkage of modified ones
};

// Calls `fn` for every difference, in path order, and returns the totals.
DiffSummary diff_snapshots(Repository& repo, const catalog::SnapshotRecord& from, const catalog::SnapshotRecord& to,
                           const std::function<void(const FileChange&)>& fn);

}  // namespace keel::engine
