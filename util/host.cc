#include "util/host.h"

#include <unistd.h>

namespace keel {

std::string local_hostname() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
}

}  // namespace keel
