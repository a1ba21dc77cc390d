// A FileSystem (util/file_system.h) that fails chosen calls, for tests and
// the torture driver: an errno (ENOSPC, EIO, EACCES…) instead of the call,
// or a short write (part of the buffer written, its length returned, as a
// full disk or a signal may do). Calls are chosen as util/fault_schedule.h
// says; the subject is the path, or for calls on a descriptor the path it
// was opened with. Everything else goes to the inner file system.
#pragma once

#include <cerrno>
#include <map>
#include <mutex>

#include "util/fault_schedule.h"
#include "util/file_system.h"

namespace keel {

enum class FsOp { kOpen, kPread, kPwrite, kFtruncate, kFsync, kFstat, kLstat, kMkdir, kRename, kUnlink };
const char* fs_op_name(FsOp op);  // "open", "pwrite", ...

struct FsFaultRule {
  enum Kind { kErrno, kShortWrite } kind = kErrno;
  FaultSelection<FsOp> when;
  int error = EIO;  // kErrno
};

class FaultInjectingFileSystem : public FileSystem {
 public:
  explicit FaultInjectingFileSystem(FileSystem& inner = posix_file_system()) : inner_(inner) {}
  FaultSchedule<FsFaultRule, FsOp>& schedule() { return schedule_; }

  int open(const std::string& path, int flags, mode_t mode) override;
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override;
  ssize_t pread(int fd, void* data, size_t size, off_t offset) override;
  ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) override;
  int ftruncate(int fd, off_t size) override;
  int fsync(int fd) override;
  int fstat(int fd, struct stat* st) override;
  int lstat(const std::string& path, struct stat* st) override;
  int mkdir(const std::string& path, mode_t mode) override;
  int rename(const std::string& from, const std::string& to) override;
  int unlink(const std::string& path) override;

 private:
  // The fault for this call, if any (errno set when it is kErrno).
  std::optional<FsFaultRule> decide(FsOp op, const std::string& subject);
  std::string path_of(int fd);
  int opened(int fd, std::string path);

  FileSystem& inner_;
  FaultSchedule<FsFaultRule, FsOp> schedule_;
  std::mutex mu_;
  std::map<int, std::string> paths_;  // descriptor -> the path it was opened with
};

}  // namespace keel
