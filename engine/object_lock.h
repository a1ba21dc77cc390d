// Object Lock repositories (docs/immutable.md): the retention every write
// carries, and keeping each snapshot's packs locked as long as it needs them.
//
// Objects are written locked until now + period + renewal margin (a tenth of
// the period), so the packs a backup writes outlive its snapshot by the
// period. A pack whose lock ends sooner than now + period when a snapshot
// (backup) or the whole repository (prune) needs it is extended to
// now + period + margin: each pack in use is extended about once per margin,
// by PutObjectRetention, never by writing its data again.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/repository.h"
#include "targets/retention.h"

namespace keel::engine {

// What writes of a repository locked by `lock` carry: every key but leases
// (locks/, running/), condemnations and damaged/, which keel rewrites or removes.
targets::WriteRetention write_retention(const ObjectLockConfig& lock);

struct RetentionRenewal {
  uint64_t packs_needed = 0;    // packs that had to be locked longer
  uint64_t packs_extended = 0;  // PutObjectRetention sent
  uint64_t packs_checked = 0;   // HEAD sent (the catalog did not know the lock)
};

// Makes sure each of `packs` stays locked until at least now + period:
// those the catalog does not know to be are asked (HEAD) and, if short,
// extended. No-op unless the repository has Object Lock.
RetentionRenewal renew_pack_retention(Repository& repo, std::span<const Id> packs);
// The same for every pack `snapshot` references; cheap when the catalog
// knows every pack in use to be locked long enough (no trees walked).
RetentionRenewal renew_snapshot_retention(Repository& repo, const catalog::SnapshotRecord& snapshot);

// keel check: every snapshot object locked until at least its time + period,
// every pack until the newest snapshot using it needs (HEAD of each; what
// it learns goes into the catalog). One message per object locked shorter.
std::vector<std::string> find_short_retention(Repository& repo);

// The object's retention if it is locked now (a HEAD), else nullopt.
std::optional<targets::Retention> active_retention(Repository& repo, const std::string& key);
// Whether an object this repository wrote at `written_unix` (and never
// extended: log entries, catalog copies) is still locked, from the time alone.
bool still_locked_since(const Repository& repo, int64_t written_unix);
// Removes `key` unless it is locked (then returns false, nothing sent but a HEAD).
bool remove_unless_locked(Repository& repo, const std::string& key);

// Throws Error(kLocked) naming the date if the snapshot's object is locked.
void refuse_if_snapshot_locked(Repository& repo, const catalog::SnapshotRecord& snapshot);

}  // namespace keel::engine
