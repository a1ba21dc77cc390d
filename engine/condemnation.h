// Condemnations: packs a prune found unused (or emptied by repacking) that a
// later prune deletes once their grace period has passed, if they are still
// unused then. One record per prune run, condemned/<record id> on the target,
// so that backups on every host stop deduplicating against those packs and a
// prune from any host (or after a catalog rebuild) knows them.
#pragma once

#include <cstdint>
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
// Every record on the target, ordered by (condemned_unix, id). Throws
// Error(kIntegrity) naming an object that does not open.
std::vector<Condemnation> list_condemnations(targets::Target& target, const Key256& key);

}  // namespace keel::engine
