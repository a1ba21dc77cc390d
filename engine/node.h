// What the engine records about one filesystem object (or stream), whatever
// agent produced it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/bytes.h"

namespace keel::engine {

enum class NodeType : uint8_t {
  kFile = 0,
  kDir = 1,
  kSymlink = 2,
  kFifo = 3,
  kCharDevice = 4,
  kBlockDevice = 5,
  kSocket = 6,
};

const char* node_type_name(NodeType type);

struct Xattr {
  std::string name;
  Bytes value;
  bool operator==(const Xattr&) const = default;
};

struct NodeMeta {
  std::string name;  // one path component; never contains '/'
  NodeType type = NodeType::kFile;
  uint32_t mode = 0;  // permission bits incl. setuid/setgid/sticky (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string user;   // names, for restores on another host
  std::string group;
  int64_t mtime_ns = 0;
  int64_t atime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t size = 0;
  uint64_t inode = 0;
  uint64_t device = 0;
  uint64_t nlink = 1;
  uint64_t rdev = 0;            // device nodes
  std::string symlink_target;   // symlinks
  std::vector<Xattr> xattrs;    // sorted by name
};

}  // namespace keel::engine
