// Turns a repository location from the command line into a Target.
//   /path, ./path, file:///path   a local directory
#pragma once

#include <memory>
#include <string>

#include "targets/target.h"

namespace keel::targets {

struct TargetOptions {
  bool create = false;  // make the location if it does not exist (init)
};

// Throws Error(kUsage) for a location keel cannot use.
std::unique_ptr<Target> open_target(const std::string& location, const TargetOptions& options);

}  // namespace keel::targets
