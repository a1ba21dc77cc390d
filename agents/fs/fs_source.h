// The filesystem agent: walks local paths and reports them to the engine as
// one tree that mirrors their absolute paths (like restic): backing up
// /home/ann and /etc gives a root directory ("" name) holding "etc" and
// "home/ann".
//
// Given paths
//  - Relative paths are taken against the working directory. The parent of
//    each path is resolved through symlinks and "..", so the tree mirrors
//    where the data really is; the last component is not followed (a symlink
//    given as a path is stored as a symlink).
//  - All paths must exist: make_fs_source throws Error(kNotFound)
//    "<path>: no such file or directory" before anything is walked.
//  - Duplicates and paths inside another given path are dropped; the rest
//    are sorted, and shared ancestors are entered once, with their real
//    metadata. paths() returns this list.
//  - Excludes and one_file_system never drop a given path or its ancestors.
//
// The walk
//  - Entries of a directory come in byte-wise name order. Metadata comes
//    from lstat: symlinks are never followed. Directories are opened with
//    openat(O_DIRECTORY | O_NOFOLLOW) relative to their parent's descriptor,
//    so a path swapped for a symlink mid-walk is not followed. One
//    descriptor stays open per directory level (plus those held by pending
//    `open` callbacks), so the depth is bounded by RLIMIT_NOFILE.
//  - NodeMeta.size is set for regular files only; rdev for devices only;
//    xattrs include every namespace the process can read (none where the
//    filesystem has no xattr support).
//  - Excludes (rules in agents/fs/exclude.h) match the absolute path of each
//    entry below a given path; an excluded entry is not reported at all.
//  - one_file_system: a directory on another device than the given path it
//    lies under (a mount point) is reported, empty, and not descended.
//  - Nothing below a given path stops the walk: an entry that vanished, a
//    directory that cannot be opened or read, or metadata that cannot be
//    read is reported with sink.skip(path, reason) and left out (a skipped
//    directory is left out whole). Only the sink's own exceptions, or a
//    failure to open "/", end a walk.
//
// add_node's `open` is set for regular files and empty for every other
// type. It may be called after add_node returns and from any thread: it
// holds the parent directory open until the last copy is destroyed. It throws
// Error(kNotFound) when the file vanished and Error(kTargetIo) when it cannot
// be opened or is no longer a regular file; the reader is described in
// agents/fs/file_reader.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/source.h"
#include "util/file_system.h"

namespace keel::agents::fs {

struct FsOptions {
  std::vector<std::string> excludes;
  bool one_file_system = false;
  // Where files' contents are opened and read; null: the real file system
  // (tests inject faults through util/fault_injecting_file_system.h).
  FileSystem* file_system = nullptr;
};

// Throws Error(kUsage) for no paths, an empty path or a bad exclude pattern,
// Error(kNotFound) for a path that does not exist, Error(kTargetIo) for a
// path that cannot be examined (permission denied on its parent).
std::unique_ptr<engine::Source> make_fs_source(std::vector<std::string> paths, FsOptions options);

}  // namespace keel::agents::fs
