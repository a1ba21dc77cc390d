// The versions behind a repository location (targets/versioned_store.h).
#pragma once

#include <memory>
#include <string>

#include "targets/open_target.h"
#include "targets/versioned_store.h"

namespace keel::targets {

// For `location` and `options` as open_target takes them: an S3 bucket.
// Throws Error(kUsage) for a location that keeps no versions (a local directory).
std::unique_ptr<VersionedStore> open_versioned_store(const std::string& location, const TargetOptions& options);

}  // namespace keel::targets
