// Condemnations: packs a prune found unused (or emptied by repacking) that a
// later prune deletes once their grace period has passed, if they are still
// unused then. One record per prune run, condemned/<record id> on the target,
// so that backups on every host stop deduplicating against those packs and a
// prune from any host (or after a catalog rebuild) knows them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/crypto.h"
#include "targets/target.h"
#include "util/id.h"

namespace keel::engine {

inline constexpr std::string_view kCondemnedPrefix = "condemned/";

struct Condemnation {
  Id id;
  int64_t condemned_unix = 0;
  std::string host;  // of the prune that wrote it
  std::vector<Id> packs;
  // The running backups (running/ leases) listed after the record was
  // written: they may have loaded their dedupe index before it existed, so
  // its packs wait until they have ended. Empty until listed (a prune that
  // stopped in between leaves it so; the next one lists them).
  std::optional<std::vector<Id>> running_backups;
};

std::string condemnation_key(const Id& record);

void put_condemnation(targets::Target& target, const Key256& key, const Condemnation& record);
// Called with the key of a record that does not open and why.
using OnDamagedRecord = std::function<void(const std::string& key, const std::string& why)>;

// Every record on the target that opens, ordered by (condemned_unix, id).
// One that does not (damaged, or garbage written by credentials that may
// create objects: an append-only host's) condemns nothing: it is skipped and
// passed to `on_damaged`, so that it cannot stop every host's sync. Skipping
// a genuine record only gives its packs back to use until the next prune.
std::vector<Condemnation> list_condemnations(targets::Target& target, const Key256& key,
                                             const OnDamagedRecord& on_damaged);

// The warning for a record list_condemnations skipped: `why` names it.
std::string ignored_condemnation(const std::string& why);

}  // namespace keel::engine
