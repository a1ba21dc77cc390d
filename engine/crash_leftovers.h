// What a keel process that was killed (or crashed) leaves on the target: its
// leases (running/, locks/) and its unfinished uploads (tmp/ of a local
// target). On the host that ran it, the next command removes them as soon as
// the process is gone; other hosts wait for the leases to expire
// (docs/maintenance.md).
#pragma once

#include <cstddef>

#include "engine/crypto.h"
#include "targets/target.h"

namespace keel::engine {

struct ClearedLeftovers {
  size_t leases = 0;
  size_t uploads = 0;
};

// Removes the leases of processes of this host that no longer run, and
// unfinished uploads: the local target's of such processes at once, any
// target's once a day old. Best effort and quiet: a target that refuses
// (read-only credentials, a lease that does not open) keeps them, and the
// leases expire anyway.
ClearedLeftovers clear_dead_process_leftovers(targets::Target& target, const Key256& key) noexcept;

}  // namespace keel::engine
