#include "util/error.h"

#include <cstring>

namespace keel {

void throw_errno(const std::string& context, int errno_value) {
  throw Error(ErrorKind::kTargetIo, context + ": " + std::strerror(errno_value));
}

}  // namespace keel
