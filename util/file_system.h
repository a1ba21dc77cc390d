// The seam between keel and the local file system, in the style of
// LevelDB's Env: restore and the file-system agent make the calls that can
// fail on a real disk (ENOSPC, EIO, short writes, a rename that fails)
// through a FileSystem, so tests put a fault-injecting one
// (util/fault_injecting_file_system.h) in its place.
//
// Each call is its POSIX namesake, on descriptors and paths, and fails the
// same way: -1 with errno set (so callers keep their own messages and
// error kinds). Descriptors are real ones; close them as usual (UniqueFd).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <string>

#include "util/bytes.h"
#include "util/fd.h"

namespace keel {

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  virtual int open(const std::string& path, int flags, mode_t mode = 0) = 0;
  virtual int openat(int dir_fd, const std::string& name, int flags, mode_t mode = 0) = 0;
  virtual ssize_t pread(int fd, void* data, size_t size, off_t offset) = 0;
  // A pread of only what the page cache holds (preadv2 with RWF_NOWAIT):
  // -1 with errno EAGAIN where it would wait for the device, or cannot tell.
  // This default cannot tell, so a file system that does not override it
  // is read with pread alone.
  virtual ssize_t pread_cached(int /*fd*/, void* /*data*/, size_t /*size*/, off_t /*offset*/) {
    errno = EAGAIN;
    return -1;
  }
  virtual ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) = 0;
  virtual int ftruncate(int fd, off_t size) = 0;
  virtual int fsync(int fd) = 0;
  virtual int fstat(int fd, struct stat* st) = 0;
  virtual int lstat(const std::string& path, struct stat* st) = 0;
  virtual int mkdir(const std::string& path, mode_t mode) = 0;
  virtual int rename(const std::string& from, const std::string& to) = 0;
  virtual int unlink(const std::string& path) = 0;
};

// The real one: plain system calls.
FileSystem& posix_file_system();

// `fs` or, when null, the real one: for options that leave it unset.
inline FileSystem& file_system_or_posix(FileSystem* fs) { return fs ? *fs : posix_file_system(); }

// The util/fd.h helpers through a FileSystem: whole buffers, EINTR and short
// transfers retried, Error(kTargetIo) with `context` on failure.
UniqueFd open_or_throw(FileSystem& fs, const std::string& path, int flags, mode_t mode = 0);
void pwrite_all(FileSystem& fs, int fd, ByteView data, off_t offset, const std::string& context);
size_t pread_full(FileSystem& fs, int fd, std::span<uint8_t> data, off_t offset, const std::string& context);

}  // namespace keel
