#define FUSE_USE_VERSION 312
#include "cli/fuse_mount.h"

#include <fuse.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>

#include "util/error.h"

namespace keel::cli {

namespace {

using engine::NodeType;
using engine::TreeEntry;
using engine::mount::FileHandle;
using engine::mount::SnapshotFs;

SnapshotFs& fs() { return *static_cast<SnapshotFs*>(fuse_get_context()->private_data); }
FileHandle& handle(fuse_file_info* fi) { return *reinterpret_cast<FileHandle*>(fi->fh); }

// Runs one operation; what it throws is reported on stderr and becomes EIO.
template <typename Fn>
int guarded(const char* path, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    std::cerr << "keel mount: " << (path ? path : "(open file)") << ": " << e.what() << "\n";
    return -EIO;
  }
}

void* op_init(fuse_conn_info*, fuse_config* cfg) {
  cfg->kernel_cache = 1;  // a snapshot's files never change: keep their pages
  cfg->entry_timeout = cfg->attr_timeout = 1.0;  // new snapshots appear within a second
  return fuse_get_context()->private_data;
}

int op_getattr(const char* path, struct stat* st, fuse_file_info*) {
  return guarded(path, [&] {
    std::shared_ptr<const TreeEntry> entry = fs().resolve(path);
    if (!entry) return -ENOENT;
    *st = fs().attributes(*entry);
    return 0;
  });
}

int op_readlink(const char* path, char* buf, size_t size) {
  return guarded(path, [&] {
    std::shared_ptr<const TreeEntry> entry = fs().resolve(path);
    if (!entry) return -ENOENT;
    if (entry->meta.type != NodeType::kSymlink) return -EINVAL;
    if (size == 0) return -EINVAL;
    size_t n = std::min(size - 1, entry->meta.symlink_target.size());
    std::memcpy(buf, entry->meta.symlink_target.data(), n);
    buf[n] = '\0';
    return 0;
  });
}

int op_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*, fuse_readdir_flags) {
  return guarded(path, [&] {
    fill(buf, ".", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
    fill(buf, "..", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
    bool found = fs().list(path, [&](const TreeEntry& e) {
      struct stat st = fs().attributes(e);
      fill(buf, e.meta.name.c_str(), &st, 0, FUSE_FILL_DIR_PLUS);
    });
    return found ? 0 : -ENOENT;
  });
}

int op_open(const char* path, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  return guarded(path, [&] {
    FileHandle* file = fs().open(path);
    if (!file) return -ENOENT;
    fi->fh = reinterpret_cast<uint64_t>(file);
    fi->keep_cache = 1;
    return 0;
  });
}

int op_read(const char* path, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  if (offset < 0) return -EINVAL;
  return guarded(path, [&] {
    std::span<uint8_t> out(reinterpret_cast<uint8_t*>(buf), size);
    return static_cast<int>(fs().read(handle(fi), static_cast<uint64_t>(offset), out));
  });
}

int op_release(const char*, fuse_file_info* fi) {
  fs().close(&handle(fi));
  return 0;
}

// The xattr `name` of `path` (size 0: its length); -ENODATA if it has none by that name.
int op_getxattr(const char* path, const char* name, char* value, size_t size) {
  return guarded(path, [&] {
    std::shared_ptr<const TreeEntry> entry = fs().resolve(path);
    if (!entry) return -ENOENT;
    for (const engine::Xattr& x : entry->meta.xattrs) {
      if (x.name != name) continue;
      if (size == 0) return static_cast<int>(x.value.size());
      if (size < x.value.size()) return -ERANGE;
      std::memcpy(value, x.value.data(), x.value.size());
      return static_cast<int>(x.value.size());
    }
    return -ENODATA;
  });
}

int op_listxattr(const char* path, char* list, size_t size) {
  return guarded(path, [&] {
    std::shared_ptr<const TreeEntry> entry = fs().resolve(path);
    if (!entry) return -ENOENT;
    std::string names;
    for (const engine::Xattr& x : entry->meta.xattrs) names.append(x.name).push_back('\0');
    if (size == 0) return static_cast<int>(names.size());
    if (size < names.size()) return -ERANGE;
    std::memcpy(list, names.data(), names.size());
    return static_cast<int>(names.size());
  });
}

// SEEK_DATA and SEEK_HOLE (the kernel answers the others): holes are known from the tree.
off_t op_lseek(const char*, off_t offset, int whence, fuse_file_info* fi) {
  const engine::mount::FileLayout& layout = handle(fi).layout;
  if (offset < 0) return -EINVAL;
  uint64_t at = static_cast<uint64_t>(offset);
  if (at >= layout.size()) return -ENXIO;
  if (whence == SEEK_DATA) {
    std::optional<uint64_t> data = layout.next_data(at);
    return data ? static_cast<off_t>(*data) : -ENXIO;
  }
  if (whence == SEEK_HOLE) return static_cast<off_t>(layout.next_hole(at));
  return -EINVAL;
}

fuse_operations operations() {
  fuse_operations ops{};
  ops.init = op_init;
  ops.getattr = op_getattr;
  ops.readlink = op_readlink;
  ops.readdir = op_readdir;
  ops.open = op_open;
  ops.read = op_read;
  ops.release = op_release;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.lseek = op_lseek;
  return ops;
}

struct FuseDeleter {
  void operator()(fuse* f) const { fuse_destroy(f); }
};

// Mounted while alive.
class Mounted {
 public:
  Mounted(fuse* f, const std::string& mountpoint) : f_(f) {
    if (fuse_mount(f, mountpoint.c_str()) != 0) {
      throw Error(ErrorKind::kFailure, "cannot mount at " + mountpoint +
                                           " (is /dev/fuse there, is fusermount3 installed, is the directory free?)");
    }
  }
  ~Mounted() { fuse_unmount(f_); }
  Mounted(const Mounted&) = delete;
  Mounted& operator=(const Mounted&) = delete;

 private:
  fuse* f_;
};

// libfuse's SIGINT/SIGTERM/SIGHUP handlers (they end the loop) while alive.
// It installs them only over the default action, so the CLI's are reset first.
class SignalHandlers {
 public:
  explicit SignalHandlers(fuse_session* se) : se_(se) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
    if (fuse_set_signal_handlers(se) != 0) throw Error(ErrorKind::kFailure, "cannot install the mount's signal handlers");
  }
  ~SignalHandlers() { fuse_remove_signal_handlers(se_); }
  SignalHandlers(const SignalHandlers&) = delete;
  SignalHandlers& operator=(const SignalHandlers&) = delete;

 private:
  fuse_session* se_;
};

struct LoopConfigDeleter {
  void operator()(fuse_loop_config* c) const { fuse_loop_cfg_destroy(c); }
};

}  // namespace

void serve_fuse(SnapshotFs& snapshot_fs, const std::string& mountpoint, const FuseOptions& options) {
  std::string mount_options = "ro,fsname=keel,subtype=keel";
  // Only other users need the kernel to check modes; the owner of the mount holds the password anyway.
  if (options.allow_other) mount_options += ",allow_other,default_permissions";
  std::vector<std::string> argv_text = {"keel", "-o", mount_options};
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_operations ops = operations();
  std::unique_ptr<fuse, FuseDeleter> f(fuse_new(&args, &ops, sizeof ops, &snapshot_fs));
  fuse_opt_free_args(&args);
  if (!f) throw Error(ErrorKind::kFailure, "cannot set up the FUSE file system (see the message above)");
  Mounted mounted(f.get(), mountpoint);
  SignalHandlers signals(fuse_get_session(f.get()));
  if (options.on_mounted) options.on_mounted();
  std::unique_ptr<fuse_loop_config, LoopConfigDeleter> config(fuse_loop_cfg_create());
  fuse_loop_cfg_set_max_threads(config.get(), 16);
  fuse_loop_cfg_set_idle_threads(config.get(), 4);
  if (fuse_loop_mt(f.get(), config.get()) < 0) {
    throw Error(ErrorKind::kFailure, "the FUSE session at " + mountpoint + " failed");
  }
}

}  // namespace keel::cli
