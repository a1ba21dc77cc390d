#include "agents/fs/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <optional>

#include "util/error.h"
#include "util/fd.h"
#include "util/file_system.h"

namespace keel::agents::fs {
namespace {

// Below this size the kernel's default read-ahead covers the file anyway.
constexpr off_t kSequentialHintMin = off_t{1} << 20;

class DataExtentReader : public engine::FileReader {
 public:
  // `st`: the open file's status. Every syscall counts (4-5 us each on the
  // development VM, more than reading a small file from the page cache), so
  // a file whose allocated blocks cover its size, which cannot hold a hole,
  // is read straight through without looking for holes, and its end is the
  // read that comes back short.
  DataExtentReader(FileSystem& fs, UniqueFd fd, std::string path, const struct stat& st)
      : fs_(fs), fd_(std::move(fd)), path_(std::move(path)), size_at_open_(static_cast<uint64_t>(st.st_size)) {
    if (st.st_size >= kSequentialHintMin) ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    if (static_cast<uint64_t>(st.st_blocks) * 512 >= static_cast<uint64_t>(st.st_size)) {
      dense_ = true;
      region_end_ = std::numeric_limits<uint64_t>::max();
    }
  }

  engine::Extent read(std::span<uint8_t> buf) override { return *next(buf, false); }
  std::optional<engine::Extent> read_cached(std::span<uint8_t> buf) override { return next(buf, true); }

 private:
  // The next extent; with `cached_only`, from the page cache alone, and
  // nullopt where its first byte is not there (or a hole is to be looked
  // for: seeking data may read the file's block map from the disk).
  std::optional<engine::Extent> next(std::span<uint8_t> buf, bool cached_only) {
    if (buf.empty()) throw Error(ErrorKind::kFailure, "read " + path_ + ": empty buffer");
    if (at_end_) return engine::Extent{end_, 0};
    if (position_ >= region_end_) {
      if (cached_only) return std::nullopt;
      if (!find_next_region()) return finish();
    }
    size_t wanted = static_cast<size_t>(std::min<uint64_t>(buf.size(), region_end_ - position_));
    size_t got = 0;
    if (cached_only) {
      std::optional<size_t> cached = pread_cached(buf.first(wanted));
      if (!cached) return std::nullopt;
      got = *cached;
      // Cached in part, before the size the file had when opened: what
      // was there; the rest is another read.
      if (got > 0 && got < wanted && position_ + got < size_at_open_) {
        engine::Extent extent{position_, got};
        position_ += got;
        return extent;
      }
    } else {
      got = pread_some(buf.first(wanted));
      // A regular file's read comes back short at its end. Only where it came
      // back short before the size the file had when opened is it read on
      // until full or at its end (pread_full's loop): confirming every end
      // with a read that finds nothing cost a system call per small file.
      if (got > 0 && got < wanted && position_ + got < size_at_open_) {
        got += pread_full(fs_, fd_.get(), buf.subspan(got, wanted - got), static_cast<off_t>(position_ + got),
                          "read " + path_);
      }
    }
    if (got == 0) return finish();
    engine::Extent extent{position_, got};
    position_ += got;
    if (got < wanted) {
      // Short read: in a dense file, the end; otherwise the file shrank
      // inside this region, so look again next call.
      if (dense_) {
        at_end_ = true;
        end_ = position_;
      } else {
        region_end_ = position_;
      }
    }
    // No FADV_DONTNEED behind the reader: it would evict pages other
    // programs are using, and the kernel ages out a one-pass scan anyway.
    return extent;
  }

  // One pread at position_ (retrying EINTR).
  size_t pread_some(std::span<uint8_t> buf) {
    for (;;) {
      const ssize_t n = fs_.pread(fd_.get(), buf.data(), buf.size(), static_cast<off_t>(position_));
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) throw_errno("read " + path_, errno);
    }
  }

  // One read at position_ of what the page cache holds; nullopt where it
  // does not hold the first byte.
  std::optional<size_t> pread_cached(std::span<uint8_t> buf) {
    for (;;) {
      const ssize_t n = fs_.pread_cached(fd_.get(), buf.data(), buf.size(), static_cast<off_t>(position_));
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EAGAIN) return std::nullopt;
      if (errno != EINTR) throw_errno("read " + path_, errno);
    }
  }

  // Moves to the next data region at or after position_; false at the end.
  bool find_next_region() {
    off_t data = ::lseek(fd_.get(), static_cast<off_t>(position_), SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) return false;
      if (errno == EINVAL) {
        // No SEEK_DATA on this filesystem: read everything, holes as zeros.
        region_end_ = std::numeric_limits<uint64_t>::max();
        return true;
      }
      throw_errno("seek data in " + path_, errno);
    }
    off_t hole = ::lseek(fd_.get(), data, SEEK_HOLE);
    if (hole < 0) {
      if (errno == ENXIO) return false;  // truncated in between
      throw_errno("seek hole in " + path_, errno);
    }
    position_ = static_cast<uint64_t>(data);
    region_end_ = static_cast<uint64_t>(hole);
    return true;
  }

  engine::Extent finish() {
    if (dense_) {  // a read at position_ found nothing: that is the size
      at_end_ = true;
      end_ = position_;
      return {end_, 0};
    }
    struct stat st;
    if (fs_.fstat(fd_.get(), &st) != 0) throw_errno("stat " + path_, errno);
    at_end_ = true;
    end_ = std::max<uint64_t>(position_, static_cast<uint64_t>(st.st_size));
    return {end_, 0};
  }

  FileSystem& fs_;
  UniqueFd fd_;
  std::string path_;
  uint64_t size_at_open_;
  uint64_t position_ = 0;
  uint64_t region_end_ = 0;  // end of the data region being read
  bool dense_ = false;  // no holes: read to the end without seeking data
  bool at_end_ = false;
  uint64_t end_ = 0;
};

int open_at(FileSystem& fs, int dir_fd, const std::string& name, int flags) {
  int fd;
  do {
    fd = fs.openat(dir_fd, name, flags);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

}  // namespace

std::unique_ptr<engine::FileReader> open_file_reader(FileSystem& fs, int dir_fd, const std::string& name,
                                                     const std::string& path) {
  // O_NONBLOCK: if the file was replaced by a fifo since it was listed, the
  // open must not hang; the type check below rejects it.
  const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  int fd = open_at(fs, dir_fd, name, flags | O_NOATIME);
  // O_NOATIME needs ownership of the file or CAP_FOWNER.
  if (fd < 0 && errno == EPERM) fd = open_at(fs, dir_fd, name, flags);
  if (fd < 0) {
    if (errno == ENOENT) throw Error(ErrorKind::kNotFound, path + ": no such file or directory");
    if (errno == ELOOP) throw Error(ErrorKind::kTargetIo, path + ": no longer a regular file");
    throw_errno("open " + path, errno);
  }
  UniqueFd file(fd);
  struct stat st;
  if (fs.fstat(file.get(), &st) != 0) throw_errno("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::kTargetIo, path + ": no longer a regular file");
  // O_NONBLOCK stays set: it has no effect on regular files (open(2)).
  return std::make_unique<DataExtentReader>(fs, std::move(file), path, st);
}

}  // namespace keel::agents::fs
