#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

#include "util/error.h"

namespace keel {

std::optional<FileLock> FileLock::try_lock(const std::string& path) {
  create_parent_dirs(path, "lock " + path);
  UniqueFd fd = open_or_throw(path, O_RDWR | O_CREAT, 0644);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return std::nullopt;
    if (errno != EINTR) throw_errno("lock " + path, errno);
  }
  return FileLock(std::move(fd));
}

bool FileLock::held_elsewhere(const std::string& path) { return !try_lock(path).has_value(); }

}  // namespace keel
