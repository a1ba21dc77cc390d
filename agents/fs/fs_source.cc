#include "agents/fs/fs_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>

#include "agents/fs/exclude.h"
#include "agents/fs/file_reader.h"
#include "agents/owner_names.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/file_system.h"
#include "util/path.h"

namespace keel::agents::fs {
namespace {

using engine::NodeMeta;
using engine::NodeType;
using PathComponents = std::vector<std::string>;
// Shared because `open` callbacks handed to the sink keep the directory open.
using DirHandle = std::shared_ptr<const UniqueFd>;

// ---- Given paths ----

[[noreturn]] void throw_path_error(const std::string& given, int error) {
  if (error == ENOENT || error == ENOTDIR) throw Error(ErrorKind::kNotFound, given + ": no such file or directory");
  throw_errno(given, error);
}

std::string real_path(const std::string& path, const std::string& given) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (!real) throw_path_error(given, errno);
  return real.get();
}

// The absolute path the snapshot records for a path the user gave, with its
// parent resolved through symlinks and "..".
PathComponents resolve_given_path(const std::string& given) {
  if (given.empty()) throw Error(ErrorKind::kUsage, "an empty path was given");
  std::string absolute = given;
  if (given.front() != '/') {
    std::unique_ptr<char, decltype(&std::free)> cwd(::getcwd(nullptr, 0), &std::free);
    if (!cwd) throw_errno("working directory", errno);
    absolute = std::string(cwd.get()) + "/" + given;
  }
  PathComponents parts = split_path(absolute);
  if (parts.empty()) return parts;
  if (parts.back() == "..") return split_path(real_path(absolute, given));
  std::string last = parts.back();
  parts.pop_back();
  std::string resolved = join_path(real_path(join_components(parts), given), last);
  struct stat st;
  if (::lstat(resolved.c_str(), &st) != 0) throw_path_error(given, errno);
  return split_path(resolved);
}

bool is_prefix(const PathComponents& prefix, const PathComponents& path) {
  return prefix.size() <= path.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
}

// Sorted, without duplicates or paths inside another one. A path sorts
// right before everything under it, so comparing neighbours suffices.
std::vector<PathComponents> merge_targets(std::vector<PathComponents> targets) {
  std::sort(targets.begin(), targets.end());
  std::vector<PathComponents> merged;
  for (PathComponents& target : targets) {
    if (merged.empty() || !is_prefix(merged.back(), target)) merged.push_back(std::move(target));
  }
  return merged;
}

// ---- Reading one directory or entry ----

std::string failure(const char* operation, int error) {
  if (error == ENOENT) return "vanished before it could be read";
  return std::string(operation) + ": " + std::strerror(error);
}

DirHandle open_directory(int parent_fd, const char* name) {
  int fd;
  do {
    fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) throw Error(ErrorKind::kTargetIo, "no longer a directory");
    throw Error(ErrorKind::kTargetIo, failure("open directory", errno));
  }
  return std::make_shared<const UniqueFd>(fd);
}

struct DirEntry {
  std::string name;
  unsigned char type;  // d_type; DT_UNKNOWN where the filesystem does not say
};

// `dir_fd` must be freshly opened (at the start of the listing). getdents64
// on it directly: fdopendir would want a descriptor of its own, and the dup,
// fstat, two fcntl and close around it cost more than listing a small
// directory (a syscall is 4-5 us on the development VM).
std::vector<DirEntry> list_directory(int dir_fd) {
  std::vector<DirEntry> entries;
  alignas(dirent64) char buf[32 * 1024];
  for (;;) {
    const ssize_t n = ::getdents64(dir_fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kTargetIo, failure("read directory", errno));
    }
    if (n == 0) break;
    for (ssize_t pos = 0; pos < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buf + pos);
      pos += entry->d_reclen;
      if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
      entries.push_back({entry->d_name, entry->d_type});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return entries;
}

NodeType node_type(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR: return NodeType::kDir;
    case S_IFLNK: return NodeType::kSymlink;
    case S_IFIFO: return NodeType::kFifo;
    case S_IFCHR: return NodeType::kCharDevice;
    case S_IFBLK: return NodeType::kBlockDevice;
    case S_IFSOCK: return NodeType::kSocket;
    default: return NodeType::kFile;
  }
}

int64_t nanoseconds(const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

// Calls an xattr getter with a growing buffer (values may grow in between).
// `call(buffer, size)` is f/llistxattr or f/lgetxattr. Returns nullopt when
// the error is one of `unreadable`; throws on any other.
template <typename Call>
std::optional<std::vector<char>> read_xattr_buffer(Call call, const char* operation,
                                                   std::initializer_list<int> unreadable) {
  for (;;) {
    ssize_t size = call(nullptr, 0);
    if (size >= 0) {
      std::vector<char> buffer(static_cast<size_t>(size));
      ssize_t got = size == 0 ? 0 : call(buffer.data(), buffer.size());
      if (got >= 0) {
        buffer.resize(static_cast<size_t>(got));
        return buffer;
      }
    }
    int error = errno;
    if (error == ERANGE) continue;
    if (std::find(unreadable.begin(), unreadable.end(), error) != unreadable.end()) return std::nullopt;
    throw Error(ErrorKind::kTargetIo, failure(operation, error));
  }
}

// `list(buf, size)` and `get(name, buf, size)` wrap the f* or l* calls.
template <typename List, typename Get>
std::vector<engine::Xattr> read_xattrs(List list, Get get) {
  // No support, or nothing this process may list: no attributes.
  std::optional<std::vector<char>> names =
      read_xattr_buffer(list, "list extended attributes", {ENOTSUP, ENOSYS, EACCES, EPERM});
  std::vector<engine::Xattr> xattrs;
  if (!names) return xattrs;
  for (size_t at = 0; at < names->size();) {
    std::string name(names->data() + at);
    at += name.size() + 1;
    // Removed since listed, or a namespace this process may not read.
    std::optional<std::vector<char>> value = read_xattr_buffer(
        [&](void* buf, size_t size) { return get(name.c_str(), buf, size); }, "read extended attribute",
        {ENODATA, ENOTSUP, EACCES, EPERM});
    if (value) xattrs.push_back({std::move(name), Bytes(value->begin(), value->end())});
  }
  std::sort(xattrs.begin(), xattrs.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return xattrs;
}

std::string read_symlink(int parent_fd, const std::string& name, size_t size_hint) {
  std::string target(std::max<size_t>(size_hint, 64) + 1, '\0');
  for (;;) {
    ssize_t n = ::readlinkat(parent_fd, name.c_str(), target.data(), target.size());
    if (n < 0) throw Error(ErrorKind::kTargetIo, failure("read symlink", errno));
    // A full buffer may mean a truncated target.
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

// ---- The walk ----

class Walker {
 public:
  Walker(engine::SourceSink& sink, const ExcludeMatcher& excludes, bool one_file_system, FileSystem& fs)
      : sink_(sink),
        fs_(fs),
        excludes_(excludes),
        one_file_system_(one_file_system),
        proc_fds_(::access("/proc/self/fd", X_OK) == 0) {}

  void walk(std::span<const PathComponents> targets) {
    const bool whole_root = targets.front().empty();  // "/" itself was given
    DirHandle root;
    NodeMeta meta;
    struct stat st;
    std::vector<DirEntry> entries;
    try {
      root = open_directory(AT_FDCWD, "/");
      meta = describe_directory(*root, "", st);
      if (whole_root) entries = list_directory(root->get());
    } catch (const Error& e) {
      throw Error(ErrorKind::kTargetIo, std::string("/: ") + e.what());
    }
    path_ = "/";
    if (whole_root) {
      walk_directory(root, meta, entries, one_file_system_ ? std::optional<dev_t>(st.st_dev) : std::nullopt);
      return;
    }
    sink_.enter_dir(meta);
    walk_ancestors(root, targets, 0);
    sink_.leave_dir();
  }

 private:
  // Keeps path_ and components_ naming the entry being visited.
  class Descend {
   public:
    Descend(Walker& walker, const std::string& name) : walker_(walker), path_length_(walker.path_.size()) {
      if (walker_.path_.size() > 1) walker_.path_ += '/';
      walker_.path_ += name;
      walker_.components_.push_back(name);
    }
    ~Descend() {
      walker_.path_.resize(path_length_);
      walker_.components_.pop_back();
    }
    Descend(const Descend&) = delete;
    Descend& operator=(const Descend&) = delete;

   private:
    Walker& walker_;
    size_t path_length_;
  };

  // The directories between the root and the given paths: each one is
  // entered only for the targets below it. All `targets` share their first
  // `depth` components, the path of `dir`.
  void walk_ancestors(const DirHandle& dir, std::span<const PathComponents> targets, size_t depth) {
    size_t begin = 0;
    while (begin < targets.size()) {
      const std::string& name = targets[begin][depth];
      size_t end = begin + 1;
      while (end < targets.size() && targets[end][depth] == name) ++end;
      Descend step(*this, name);
      if (targets[begin].size() == depth + 1) {
        // A given path; merging left no other target under it.
        visit(dir, name, DT_UNKNOWN, /*given=*/true, std::nullopt);
      } else {
        walk_ancestor(dir, name, targets.subspan(begin, end - begin), depth + 1);
      }
      begin = end;
    }
  }

  void walk_ancestor(const DirHandle& parent, const std::string& name, std::span<const PathComponents> targets,
                     size_t depth) {
    DirHandle dir;
    NodeMeta meta;
    try {
      dir = open_directory(parent->get(), name.c_str());
      struct stat st;
      meta = describe_directory(*dir, name, st);
    } catch (const Error& e) {
      sink_.skip(path_, e.what());
      return;
    }
    sink_.enter_dir(meta);
    walk_ancestors(dir, targets, depth);
    sink_.leave_dir();
  }

  // One entry of `parent`, named by path_. `d_type` comes from readdir
  // (DT_UNKNOWN when not known); `device` is the one_file_system limit.
  void visit(const DirHandle& parent, const std::string& name, unsigned char d_type, bool given,
             std::optional<dev_t> device) {
    bool check_excludes = !given && !excludes_.empty();
    // Decide on the listed type when there is one: no stat for excluded entries.
    if (check_excludes && d_type != DT_UNKNOWN) {
      if (excludes_.excluded(components_, d_type == DT_DIR)) return;
      check_excludes = false;
    }
    struct stat st;
    if (::fstatat(parent->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      sink_.skip(path_, failure("stat", errno));
      return;
    }
    if (check_excludes && excludes_.excluded(components_, S_ISDIR(st.st_mode))) return;
    if (given && one_file_system_) device = st.st_dev;

    if (S_ISDIR(st.st_mode) && !(device && st.st_dev != *device)) {
      visit_directory(parent, name, device);
      return;
    }
    NodeMeta meta;
    try {
      meta = describe_entry(parent->get(), name, st);
    } catch (const Error& e) {
      sink_.skip(path_, e.what());
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      // A mount point under one_file_system: kept, so a restore recreates
      // it, but not descended.
      sink_.enter_dir(meta);
      sink_.leave_dir();
      return;
    }
    engine::OpenFile open;
    if (S_ISREG(st.st_mode)) {
      open = [parent, name, path = path_, &fs = fs_] { return open_file_reader(fs, parent->get(), name, path); };
    }
    sink_.add_node(meta, open);
  }

  void visit_directory(const DirHandle& parent, const std::string& name, std::optional<dev_t> device) {
    DirHandle dir;
    NodeMeta meta;
    std::vector<DirEntry> entries;
    try {
      dir = open_directory(parent->get(), name.c_str());
      struct stat st;
      meta = describe_directory(*dir, name, st);
      entries = list_directory(dir->get());
    } catch (const Error& e) {
      sink_.skip(path_, e.what());
      return;
    }
    walk_directory(dir, meta, entries, device);
  }

  void walk_directory(const DirHandle& dir, const NodeMeta& meta, const std::vector<DirEntry>& entries,
                      std::optional<dev_t> device) {
    sink_.enter_dir(meta);
    for (const DirEntry& entry : entries) {
      Descend step(*this, entry.name);
      visit(dir, entry.name, entry.type, /*given=*/false, device);
    }
    sink_.leave_dir();
  }

  NodeMeta describe_directory(const UniqueFd& dir, const std::string& name, struct stat& st) {
    if (::fstat(dir.get(), &st) != 0) throw Error(ErrorKind::kTargetIo, failure("stat", errno));
    NodeMeta meta = meta_from_stat(st, name);
    int fd = dir.get();
    meta.xattrs = read_xattrs([fd](void* buf, size_t size) { return ::flistxattr(fd, static_cast<char*>(buf), size); },
                              [fd](const char* attr, void* buf, size_t size) {
                                return ::fgetxattr(fd, attr, buf, size);
                              });
    return meta;
  }

  NodeMeta describe_entry(int parent_fd, const std::string& name, const struct stat& st) {
    NodeMeta meta = meta_from_stat(st, name);
    if (S_ISLNK(st.st_mode)) meta.symlink_target = read_symlink(parent_fd, name, static_cast<size_t>(st.st_size));
    // There is no l*xattr call relative to a directory descriptor; the
    // /proc/self/fd link reaches the entry through `parent_fd` all the same.
    std::string path = proc_fds_ ? "/proc/self/fd/" + std::to_string(parent_fd) + "/" + name : path_;
    meta.xattrs = read_xattrs(
        [&path](void* buf, size_t size) { return ::llistxattr(path.c_str(), static_cast<char*>(buf), size); },
        [&path](const char* attr, void* buf, size_t size) { return ::lgetxattr(path.c_str(), attr, buf, size); });
    return meta;
  }

  NodeMeta meta_from_stat(const struct stat& st, const std::string& name) {
    NodeMeta meta;
    meta.name = name;
    meta.type = node_type(st.st_mode);
    meta.mode = st.st_mode & 07777;
    meta.uid = st.st_uid;
    meta.gid = st.st_gid;
    meta.user = owners_.user(st.st_uid);
    meta.group = owners_.group(st.st_gid);
    meta.mtime_ns = nanoseconds(st.st_mtim);
    meta.atime_ns = nanoseconds(st.st_atim);
    meta.ctime_ns = nanoseconds(st.st_ctim);
    meta.size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
    meta.inode = st.st_ino;
    meta.device = st.st_dev;
    meta.nlink = st.st_nlink;
    meta.rdev = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? st.st_rdev : 0;
    return meta;
  }

  engine::SourceSink& sink_;
  FileSystem& fs_;
  const ExcludeMatcher& excludes_;
  bool one_file_system_;
  bool proc_fds_;  // /proc/self/fd is usable
  OwnerNames owners_;
  std::string path_;             // the entry being visited
  PathComponents components_;    // path_, split
};

class FsSource : public engine::Source {
 public:
  FsSource(std::vector<PathComponents> targets, ExcludeMatcher excludes, bool one_file_system, FileSystem& fs)
      : targets_(std::move(targets)), excludes_(std::move(excludes)), one_file_system_(one_file_system), fs_(fs) {}

  std::vector<std::string> paths() const override {
    std::vector<std::string> paths;
    for (const PathComponents& target : targets_) paths.push_back(join_components(target));
    return paths;
  }

  void walk(engine::SourceSink& sink) override { Walker(sink, excludes_, one_file_system_, fs_).walk(targets_); }

 private:
  std::vector<PathComponents> targets_;
  ExcludeMatcher excludes_;
  bool one_file_system_;
  FileSystem& fs_;
};

}  // namespace

std::unique_ptr<engine::Source> make_fs_source(std::vector<std::string> paths, FsOptions options) {
  if (paths.empty()) throw Error(ErrorKind::kUsage, "no paths to back up");
  ExcludeMatcher excludes(options.excludes);
  std::vector<PathComponents> targets;
  for (const std::string& path : paths) targets.push_back(resolve_given_path(path));
  return std::make_unique<FsSource>(merge_targets(std::move(targets)), std::move(excludes), options.one_file_system,
                                    file_system_or_posix(options.file_system));
}

}  // namespace keel::agents::fs
