// Directory trees: one content-addressed blob per directory, like a git tree.
// A tree lists its entries sorted by name; a file entry lists its content as
// chunk references, a directory entry names its subtree by id. A directory
// whose entries did not change encodes to the same bytes, hence the same id,
// so unchanged directories are shared across snapshots.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/node.h"
#include "util/checksum.h"
#include "util/id.h"

namespace keel::engine {

// One piece of a file's content: a stored chunk, or a run of zeros (a hole
// in a sparse file, or an all-zero chunk) that is not stored at all.
struct ContentRef {
  Id chunk;  // zero when `hole`
  uint64_t length = 0;
  bool hole = false;
  bool operator==(const ContentRef&) const = default;
};

struct TreeEntry {
  NodeMeta meta;  // atime is not stored: it changes on every read
  std::vector<ContentRef> content;  // files
  Hash128 file_hash{};              // files: XXH3-128 of the whole content
  Id subtree;                       // directories
};

struct Tree {
  std::vector<TreeEntry> entries;  // sorted by meta.name, names unique

  Bytes encode() const;
  // Throws Error(kIntegrity) naming `what` if `body` is malformed.
  static Tree decode(ByteView body, const std::string& what);

  const TreeEntry* find(std::string_view name) const;
};

}  // namespace keel::engine
