// A snapshot's directory as a POSIX tar stream (`keel dump`): ustar headers,
// with pax extended headers where a name, link target, size or id does not
// fit ustar's fields. Files are read through the restore path (stream_file),
// each checked against its stored hash.
#pragma once

#include <cstdint>
#include <string>

#include "catalog/catalog.h"
#include "engine/repository.h"

namespace keel::engine {

struct DumpResult {
  uint64_t entries = 0;
  uint64_t file_bytes = 0;
};

// Writes `path` of `snapshot` and everything below it to `fd` as a tar
// archive. Member names are the snapshot paths without the leading '/'.
// Sockets are left out (tar has no type for them).
DumpResult dump_tar(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& path, int fd);

}  // namespace keel::engine
