// keel migrate --format 2: turns a format-1 repository into a format-2 one
// (put-only keys possible, docs/repository-format.md) without rewriting its
// packs, trees or snapshots, which full keys keep reading under the data key.
//
// Steps, under the maintenance lock, each safe to be killed after:
//   1. keys-v2: a new index key and key pair, sealed under the data key
//      (the format-1 key slots cannot be rewritten without their
//      passwords). A rerun reuses the one there.
//   2. pack-index/<pack id> for every version-1 pack: its blob table under
//      the index key, so that put-only keys index it. Those already there
//      and intact are kept.
//   3. Condemnation records (sealed under the data key) are removed: their
//      packs are back in use until the next prune condemns them again.
//   4. The config, rewritten as KEELCFG2 under the index key: the commit
//      point. Before it the repository is format 1 (keel of either kind
//      ignores keys-v2 and pack-index/), after it format 2.
// A rerun on a migrated repository writes the pack indexes still missing
// (packs a backup started before the switch wrote after it).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/repository.h"

namespace keel::engine {

struct MigrateOptions {
  const std::atomic<bool>* cancel = nullptr;
};

struct MigrateResult {
  uint32_t format_before = 1;
  bool made_as_format2 = false;   // keel init --format 2: nothing to migrate
  bool switched = false;          // the config was rewritten as format 2 by this run
  bool keys_written = false;      // keys-v2 written by this run (false: an earlier run's reused)
  uint64_t packs = 0;             // on the target
  uint64_t packs_indexed = 0;     // pack-index objects written by this run
  uint64_t packs_already_indexed = 0;
  uint64_t condemnations_removed = 0;
  std::vector<std::string> not_indexed;  // packs whose header does not open (keel check names them too)
  std::vector<std::string> warnings;     // e.g. a keys-v2 that did not open, replaced before the switch
};

// Needs a full key. Throws Error(kLocked) while another maintenance run
// holds the lock or a backup runs (its packs could miss their index);
// nothing is switched then, and a rerun goes on where this one stopped.
MigrateResult migrate_to_format2(Repository& repo, const MigrateOptions& options = {});

}  // namespace keel::engine
