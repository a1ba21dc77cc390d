#include "util/fault_injecting_file_system.h"

#include <algorithm>
#include <cstring>

namespace keel {

const char* fs_op_name(FsOp op) {
  switch (op) {
    case FsOp::kOpen: return "open";
    case FsOp::kPread: return "pread";
    case FsOp::kPwrite: return "pwrite";
    case FsOp::kFtruncate: return "ftruncate";
    case FsOp::kFsync: return "fsync";
    case FsOp::kFstat: return "fstat";
    case FsOp::kLstat: return "lstat";
    case FsOp::kMkdir: return "mkdir";
    case FsOp::kRename: return "rename";
    case FsOp::kUnlink: return "unlink";
  }
  return "?";
}

std::optional<FsFaultRule> FaultInjectingFileSystem::decide(FsOp op, const std::string& subject) {
  auto d = schedule_.decide(op, subject, std::string(fs_op_name(op)) + " " + subject, [](const FsFaultRule& rule) {
    return rule.kind == FsFaultRule::kShortWrite ? std::string("short write")
                                                 : std::string("errno ") + std::strerror(rule.error);
  });
  if (d.rule && d.rule->kind == FsFaultRule::kErrno) errno = d.rule->error;
  return d.rule;
}

std::string FaultInjectingFileSystem::path_of(int fd) {
  std::lock_guard lock(mu_);
  auto it = paths_.find(fd);
  return it == paths_.end() ? "fd " + std::to_string(fd) : it->second;
}

int FaultInjectingFileSystem::opened(int fd, std::string path) {
  if (fd >= 0) {
    std::lock_guard lock(mu_);
    paths_[fd] = std::move(path);
  }
  return fd;
}

int FaultInjectingFileSystem::open(const std::string& path, int flags, mode_t mode) {
  if (decide(FsOp::kOpen, path)) return -1;
  return opened(inner_.open(path, flags, mode), path);
}

int FaultInjectingFileSystem::openat(int dir_fd, const std::string& name, int flags, mode_t mode) {
  std::string path = path_of(dir_fd) + "/" + name;
  if (decide(FsOp::kOpen, path)) return -1;
  return opened(inner_.openat(dir_fd, name, flags, mode), std::move(path));
}

ssize_t FaultInjectingFileSystem::pread(int fd, void* data, size_t size, off_t offset) {
  if (decide(FsOp::kPread, path_of(fd))) return -1;
  return inner_.pread(fd, data, size, offset);
}

ssize_t FaultInjectingFileSystem::pwrite(int fd, const void* data, size_t size, off_t offset) {
  std::optional<FsFaultRule> fault = decide(FsOp::kPwrite, path_of(fd));
  if (!fault) return inner_.pwrite(fd, data, size, offset);
  if (fault->kind == FsFaultRule::kErrno) return -1;
  return inner_.pwrite(fd, data, std::max<size_t>(1, size / 2), offset);
}

int FaultInjectingFileSystem::ftruncate(int fd, off_t size) {
  if (decide(FsOp::kFtruncate, path_of(fd))) return -1;
  return inner_.ftruncate(fd, size);
}

int FaultInjectingFileSystem::fsync(int fd) {
  if (decide(FsOp::kFsync, path_of(fd))) return -1;
  return inner_.fsync(fd);
}

int FaultInjectingFileSystem::fstat(int fd, struct stat* st) {
  if (decide(FsOp::kFstat, path_of(fd))) return -1;
  return inner_.fstat(fd, st);
}

int FaultInjectingFileSystem::lstat(const std::string& path, struct stat* st) {
  if (decide(FsOp::kLstat, path)) return -1;
  return inner_.lstat(path, st);
}

int FaultInjectingFileSystem::mkdir(const std::string& path, mode_t mode) {
  if (decide(FsOp::kMkdir, path)) return -1;
  return inner_.mkdir(path, mode);
}

int FaultInjectingFileSystem::rename(const std::string& from, const std::string& to) {
  if (decide(FsOp::kRename, from)) return -1;
  return inner_.rename(from, to);
}

int FaultInjectingFileSystem::unlink(const std::string& path) {
  if (decide(FsOp::kUnlink, path)) return -1;
  return inner_.unlink(path);
}

}  // namespace keel
