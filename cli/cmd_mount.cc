// keel mount MOUNTPOINT: the repository's snapshots as a read-only file tree (FUSE).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/fuse_mount.h"
#include "cli/parse.h"
#include "engine/mount/mount_source.h"
#include "engine/mount/snapshot_fs.h"
#include "util/error.h"

namespace keel::cli {

namespace {

// Blocks SIGINT/SIGTERM/SIGHUP while alive, so the threads started meanwhile
// (the chunk fetchers) never take them: they must reach a FUSE thread.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

 private:
  sigset_t old_;
};

}  // namespace

int cmd_mount(App& app, const Args& args) {
  std::string mountpoint, cache_size = "256M", read_ahead = "8M";
  size_t fetchers = 0;
  bool allow_other = false;
  po::options_description opts(
      "keel mount MOUNTPOINT: the snapshots as a read-only file tree (snapshots/<time>, latest, hosts/, tags/, "
      "ids/) until Ctrl-C, SIGTERM or fusermount3 -u MOUNTPOINT");
  opts.add_options()
      ("mountpoint", po::value(&mountpoint), "an empty directory")
      ("cache-size", po::value(&cache_size), "chunks kept in memory (default 256M)")
      ("read-ahead", po::value(&read_ahead), "fetched ahead of a sequential reader (default 8M)")
      ("fetchers", po::value(&fetchers), "chunk fetches in parallel (default: 2 per core, at least 4)")
      ("allow-other", po::bool_switch(&allow_other), "let other users in (the kernel then checks modes)");
  po::positional_options_description pos;
  pos.add("mountpoint", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (mountpoint.empty()) throw Error(ErrorKind::kUsage, "mount needs a MOUNTPOINT (an empty directory)");
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error(ErrorKind::kUsage, "mount point " + mountpoint + " is not a directory");
  }
  engine::mount::MountOptions options;
  options.cache_bytes = parse_size(cache_size, "--cache-size");
  options.read_ahead = parse_size(read_ahead, "--read-ahead");
  options.fetchers = fetchers;
  options.uid = ::getuid();
  options.gid = ::getgid();

  auto repo = app.open_repository("keel mount");
  std::unique_ptr<engine::mount::MountSource> source = engine::mount::repository_source(*repo);
  std::unique_ptr<engine::mount::SnapshotFs> fs;
  {
    BlockedSignals blocked;
    fs = std::make_unique<engine::mount::SnapshotFs>(*source, options);
  }
  size_t snapshots = fs->index()->snapshots.size();
  FuseOptions fuse_options;
  fuse_options.allow_other = allow_other;
  fuse_options.on_mounted = [&] {
    app.warn("keel mount: " + std::to_string(snapshots) + " snapshots of " + repo->target().describe() + " at " +
             mountpoint + " (read-only); Ctrl-C or fusermount3 -u " + mountpoint + " unmounts");
  };
  serve_fuse(*fs, mountpoint, fuse_options);
  engine::mount::ChunkCacheStats stats = fs->cache().stats();
  app.warn("keel mount: unmounted " + mountpoint + "; read " + std::to_string(stats.fetches) + " chunks (" +
           human_bytes(stats.fetched_bytes) + "), " + std::to_string(stats.hits) + " served from the cache");
  return 0;
}

}  // namespace keel::cli
