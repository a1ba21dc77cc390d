#include "util/file_system.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>

namespace keel {
namespace {

class PosixFileSystem : public FileSystem {
 public:
  int open(const std::string& path, int flags, mode_t mode) override { return ::open(path.c_str(), flags, mode); }
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    return ::openat(dir_fd, name.c_str(), flags, mode);
  }
  ssize_t pread(int fd, void* data, size_t size, off_t offset) override { return ::pread(fd, data, size, offset); }
  ssize_t pread_cached(int fd, void* data, size_t size, off_t offset) override {
    struct iovec v{data, size};
    const ssize_t n = ::preadv2(fd, &v, 1, offset, RWF_NOWAIT);
    // File systems without non-blocking reads (EOPNOTSUPP), kernels before
    // 4.14 (EINVAL): cannot tell. A real EINVAL comes back from pread.
    if (n < 0 && (errno == EOPNOTSUPP || errno == EINVAL)) errno = EAGAIN;
    return n;
  }
  ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) override {
    return ::pwrite(fd, data, size, offset);
  }
  int ftruncate(int fd, off_t size) override { return ::ftruncate(fd, size); }
  int fsync(int fd) override { return ::fsync(fd); }
  int fstat(int fd, struct stat* st) override { return ::fstat(fd, st); }
  int lstat(const std::string& path, struct stat* st) override { return ::lstat(path.c_str(), st); }
  int mkdir(const std::string& path, mode_t mode) override { return ::mkdir(path.c_str(), mode); }
  int rename(const std::string& from, const std::string& to) override { return ::rename(from.c_str(), to.c_str()); }
  int unlink(const std::string& path) override { return ::unlink(path.c_str()); }
};

}  // namespace

FileSystem& posix_file_system() {
  static PosixFileSystem fs;
  return fs;
}

}  // namespace keel
