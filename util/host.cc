#include "util/host.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace keel {

std::string local_hostname() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
}

bool process_running_here(int64_t pid) {
  if (pid <= 0 || pid != static_cast<pid_t>(pid)) return true;  // not a pid we can ask about
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

}  // namespace keel
