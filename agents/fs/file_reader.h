// Reads a regular file's content for a backup: only its data extents (holes
// are found with SEEK_DATA/SEEK_HOLE and skipped), in large sequential reads,
// dropping what was read from the page cache so a backup does not evict the
// host's working set.
#pragma once

#include <memory>
#include <string>

#include "engine/source.h"
#include "util/file_system.h"

namespace keel::agents::fs {

// Opens `name` inside the open directory `dir_fd` without following a
// symlink and without updating its atime where the process may. `path` names
// the file in error messages.
// Throws Error(kNotFound) if the file is gone, Error(kTargetIo) if it cannot
// be opened or is no longer a regular file.
// The reader throws Error(kTargetIo) on a read error. Its last Extent
// (length 0) has as offset the file's size when reading ended, so a trailing
// hole is visible; a file that shrinks while read ends early.
// Opens, reads and stats through `fs`.
std::unique_ptr<engine::FileReader> open_file_reader(FileSystem& fs, int dir_fd, const std::string& name,
                                                     const std::string& path);

}  // namespace keel::agents::fs
