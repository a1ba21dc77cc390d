#include "util/fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "util/error.h"
#include "util/file_system.h"
#include "util/id.h"

namespace keel {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

UniqueFd open_or_throw(const std::string& path, int flags, mode_t mode) {
  return open_or_throw(posix_file_system(), path, flags, mode);
}

UniqueFd open_or_throw(FileSystem& fs, const std::string& path, int flags, mode_t mode) {
  int fd;
  do {
    fd = fs.open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) throw Error(ErrorKind::kNotFound, "open " + path + ": no such file or directory");
    throw_errno("open " + path, e);
  }
  return UniqueFd(fd);
}

namespace {

// Repeats `io(done)` (a read or write of the rest of the buffer) until
// `size` bytes moved or it returns 0 (EOF); retries EINTR.
template <typename Io>
size_t transfer_all(size_t size, const std::string& context, Io io) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = io(done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(context, errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

void write_all(int fd, ByteView data, const std::string& context) {
  size_t n = transfer_all(data.size(), context,
                          [&](size_t done) { return ::write(fd, data.data() + done, data.size() - done); });
  if (n != data.size()) throw Error(ErrorKind::kTargetIo, context + ": short write");
}

void pwrite_all(int fd, ByteView data, off_t offset, const std::string& context) {
  pwrite_all(posix_file_system(), fd, data, offset, context);
}

void pwrite_all(FileSystem& fs, int fd, ByteView data, off_t offset, const std::string& context) {
  size_t n = transfer_all(data.size(), context, [&](size_t done) {
    return fs.pwrite(fd, data.data() + done, data.size() - done, offset + static_cast<off_t>(done));
  });
  if (n != data.size()) throw Error(ErrorKind::kTargetIo, context + ": short write");
}

size_t pread_full(int fd, std::span<uint8_t> data, off_t offset, const std::string& context) {
  return pread_full(posix_file_system(), fd, data, offset, context);
}

size_t pread_full(FileSystem& fs, int fd, std::span<uint8_t> data, off_t offset, const std::string& context) {
  return transfer_all(data.size(), context, [&](size_t done) {
    return fs.pread(fd, data.data() + done, data.size() - done, offset + static_cast<off_t>(done));
  });
}

size_t read_full(int fd, std::span<uint8_t> data, const std::string& context) {
  return transfer_all(data.size(), context, [&](size_t done) { return ::read(fd, data.data() + done, data.size() - done); });
}

void fsync_or_throw(int fd, const std::string& context) {
  if (::fsync(fd) != 0) throw_errno("fsync " + context, errno);
}

void fsync_dir(const std::string& dir) {
  UniqueFd fd = open_or_throw(dir, O_RDONLY | O_DIRECTORY);
  fsync_or_throw(fd.get(), dir);
}

Bytes read_file(const std::string& path) {
  UniqueFd fd = open_or_throw(path, O_RDONLY);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_errno("stat " + path, errno);
  Bytes out(static_cast<size_t>(st.st_size));
  out.resize(read_full(fd.get(), out, "read " + path));
  return out;
}

void create_parent_dirs(const std::string& path, const std::string& context) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) throw Error(ErrorKind::kTargetIo, context + ": cannot create directory " + parent.string() + ": " + ec.message());
}

void write_file_atomic(const std::string& path, ByteView data, mode_t mode) {
  std::filesystem::path p(path);
  std::string tmp = path + ".tmp-" + Id::random().short_hex();
  {
    UniqueFd fd = open_or_throw(tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
    try {
      write_all(fd.get(), data, "write " + tmp);
      fsync_or_throw(fd.get(), tmp);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_errno("rename " + tmp + " to " + path, e);
  }
  fsync_dir(p.parent_path().empty() ? "." : p.parent_path().string());
}

}  // namespace keel
