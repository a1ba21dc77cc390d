// RAII for file descriptors, and whole-buffer read/write helpers that retry
// on EINTR and short transfers. All throw Error(kTargetIo) with `context`.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

#include "util/bytes.h"

namespace keel {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// open(2) that throws with the path in the message.
UniqueFd open_or_throw(const std::string& path, int flags, mode_t mode = 0);

void write_all(int fd, ByteView data, const std::string& context);
void pwrite_all(int fd, ByteView data, off_t offset, const std::string& context);
// Reads up to data.size() bytes at `offset`; returns fewer only at EOF.
size_t pread_full(int fd, std::span<uint8_t> data, off_t offset, const std::string& context);
// Reads until data is full or EOF; returns bytes read.
size_t read_full(int fd, std::span<uint8_t> data, const std::string& context);
void fsync_or_throw(int fd, const std::string& context);
// fsync of a directory, so a rename or create inside it is durable.
void fsync_dir(const std::string& dir);

// Creates the directories that will hold `path`, if missing. Throws
// Error(kTargetIo) "<context>: cannot create directory <dir>: <reason>".
void create_parent_dirs(const std::string& path, const std::string& context);

Bytes read_file(const std::string& path);
// Write to a temporary name, fsync, rename over `path`, fsync the directory.
void write_file_atomic(const std::string& path, ByteView data, mode_t mode = 0644);

}  // namespace keel
