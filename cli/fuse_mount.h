// The FUSE glue of `keel mount`: serves a SnapshotFs through libfuse 3 at a
// mount point, read-only, until it is unmounted (fusermount3 -u) or the
// process gets SIGINT, SIGTERM or SIGHUP, then unmounts.
#pragma once

#include <functional>
#include <string>

#include "engine/mount/snapshot_fs.h"

namespace keel::cli {

struct FuseOptions {
  bool allow_other = false;  // other users may enter (needs user_allow_other in /etc/fuse.conf unless root)
  std::function<void()> on_mounted;  // called once the mount is in place
};

// Blocks while the file system is mounted. Throws Error(kFailure) if it
// cannot be mounted (no /dev/fuse, mount point in use, no permission).
void serve_fuse(engine::mount::SnapshotFs& fs, const std::string& mountpoint, const FuseOptions& options);

}  // namespace keel::cli
