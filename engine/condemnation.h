// Condemnations: packs a prune found unused (or emptied by repacking) that a
// later prune deletes once their grace period has passed, if they are still
// unused then. One record per prune run, condemned/<record id> on the target,
// so that backups on every host stop deduplicating against those packs and a
// prune from any host (or after a catalog rebuild) knows them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/crypto.h"
#include "engine/lease.h"
#include "targets/target.h"
#include "util/id.h"

namespace keel::engine {

inline constexpr std::string_view kCondemnedPrefix = "condemned/";

struct Condemnation {
  Id id;
  int64_t condemned_unix = 0;  // as the record claims (the writer's clock)
  std::string host;  // of the prune that wrote it
  std::vector<Id> packs;
  // The running backups (running/ leases) listed after the record was
  // written: they may have loaded their dedupe index before it existed, so
  // its packs wait until they have ended. Empty until listed (a prune that
  // stopped in between leaves it so; the next one lists them).
  std::optional<std::vector<Id>> running_backups;
  // When the store last wrote the record object, by its own clock (from the
  // listing; not part of the record).
  int64_t modified_unix = 0;

  // Where its grace period starts. A key that seals records (a put-only or
  // stolen one) can claim any date and an empty list of running backups;
  // it cannot set the store's clock. So the grace counts from the later of
  // the date claimed and the object's Last-Modified. A record prune
  // rewrites gets a later Last-Modified: its packs' grace starts again then
  // (a delay, never a loss).
  int64_t grace_from() const { return std::max(condemned_unix, modified_unix); }
  // Whether the backup holding `lease` (alive now) may have listed the
  // condemnations before this record existed, and so may use its packs:
  // named in the record's list, or, whatever that list says, its lease
  // claims to have started no later than the store wrote the record, or
  // the store wrote the lease before it. A lease written by a host that may
  // only create objects can only make packs wait longer.
  bool ran_when_written(const LeaseRecord& lease) const;
};

std::string condemnation_key(const Id& record);

void put_condemnation(targets::Target& target, const Key256& key, const Condemnation& record);
// Called with the key of a record that does not open and why.
using OnDamagedRecord = std::function<void(const std::string& key, const std::string& why)>;

// Every record on the target that opens, with its modified_unix, ordered
// by (condemned_unix, id).
// One that does not (damaged, or garbage written by credentials that may
// create objects: an append-only host's) condemns nothing: it is skipped and
// passed to `on_damaged`, so that it cannot stop every host's sync. Skipping
// a genuine record only gives its packs back to use until the next prune.
std::vector<Condemnation> list_condemnations(targets::Target& target, const Key256& key,
                                             const OnDamagedRecord& on_damaged);

// The warning for a record list_condemnations skipped: `why` names it.
std::string ignored_condemnation(const std::string& why);

}  // namespace keel::engine
