#include "engine/crash_leftovers.h"

#include <chrono>
#include <exception>

#include "engine/lease.h"

namespace keel::engine {
namespace {

constexpr std::chrono::hours kAbandonedUploadAge{24};

}  // namespace

ClearedLeftovers clear_dead_process_leftovers(targets::Target& target, const Key256& key) noexcept {
  ClearedLeftovers cleared;
  try {
    cleared.leases = remove_leases(target, key, [](const LeaseRecord& l) { return l.abandoned_here(); }).size();
  } catch (const std::exception&) {
    // Left to expire.
  }
  try {
    // The local target also removes those of dead processes of this host at
    // any age; the day is what backup itself waits before removing others'.
    cleared.uploads = target.remove_stale_uploads(kAbandonedUploadAge);
  } catch (const std::exception&) {
    // Left for prune and the next backup.
  }
  return cleared;
}

}  // namespace keel::engine
