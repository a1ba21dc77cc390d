#include "targets/open_target.h"

#include "targets/local/local_target.h"
#include "util/error.h"

namespace keel::targets {

std::unique_ptr<Target> open_target(const std::string& location, const TargetOptions& options) {
  if (location.empty()) throw Error(ErrorKind::kUsage, "no repository given: use --repo or set KEEL_REPO");
  std::string path = location;
  if (path.rfind("file://", 0) == 0) path = path.substr(7);
  auto scheme = path.find("://");
  if (scheme != std::string::npos) {
    throw Error(ErrorKind::kUsage, "repository " + location + ": unsupported scheme '" + path.substr(0, scheme) +
                                       "' (this build supports local directories)");
  }
  return local::open_local_target(path, options.create);
}

}  // namespace keel::targets
