// An exclusive advisory lock on a file (flock), held while the object lives.
// The kernel drops it when the holder exits however it exits, so a crashed
// process never leaves a stale lock behind.
#pragma once

#include <optional>
#include <string>

#include "util/fd.h"

namespace keel {

class FileLock {
 public:
  // Creates the file (and its directory) if needed and takes the lock
  // without waiting: nullopt while another process (or another open of the
  // file) holds it. Throws Error(kTargetIo) if the file cannot be opened.
  static std::optional<FileLock> try_lock(const std::string& path);

  // Whether someone holds the lock now (takes and drops it if free).
  static bool held_elsewhere(const std::string& path);

 private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace keel
