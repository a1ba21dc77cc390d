// Keeps keel from deleting a locked object. Once the target writes with a
// retention (set_write_retention: an Object Lock repository), remove() heads
// every key the rule locks first and refuses, with Error(kLocked) naming the retain-until
// date, while its retention lasts. S3 itself would not refuse: a DELETE
// without a version id in a versioned bucket succeeds by hiding the object
// behind a delete marker. Stacked by engine::Repository on the targets of
// Object Lock repositories.
#pragma once

#include <memory>

#include "targets/target.h"

namespace keel::targets {

std::unique_ptr<Target> make_retention_guard(std::unique_ptr<Target> inner);

}  // namespace keel::targets
