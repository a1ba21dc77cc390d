// A repository in a local directory. Uploads go to a temporary file under
// <root>/tmp/ and are published by fsync + rename + fsync of the directory,
// so a crash leaves either the whole object or nothing under its key.
#pragma once

#include <memory>
#include <string>

#include "targets/target.h"

namespace keel::targets::local {

// Creates `root` if `create` is set; otherwise it must exist.
std::unique_ptr<Target> open_local_target(const std::string& root, bool create);

}  // namespace keel::targets::local
