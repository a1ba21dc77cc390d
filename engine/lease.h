// Leases: small objects on the target that say "this process is busy here
// until T". A lease is written when taken, rewritten with a later expiry
// while held, and removed when released. One left by a process that died
// expires on its own after LeaseOptions::ttl (15 minutes); on the host that
// wrote it, the next keel command removes it as soon as the process is gone
// (clear_abandoned_leases).
//
//   locks/<id>     the maintenance lock (prune): exclusive, see acquire_lock
//   running/<id>   a backup in progress: not a lock, nothing waits for it to
//                  start; prune defers deleting packs while a backup that
//                  may use them runs (docs/maintenance.md)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/crypto.h"
#include "targets/target.h"

namespace keel::engine {

// Seconds since the Unix epoch; injectable so tests can move time.
using UnixClock = std::function<int64_t()>;
int64_t unix_now();

inline constexpr std::string_view kLockPrefix = "locks/";
inline constexpr std::string_view kRunningPrefix = "running/";

struct LeaseRecord {
  Id id;
  std::string host;
  int64_t pid = 0;
  int64_t created_unix = 0;
  int64_t expires_unix = 0;
  // When the store last wrote the lease object (its clock; from the listing,
  // not part of the record).
  int64_t modified_unix = 0;

  bool expired(int64_t now_unix) const { return now_unix >= expires_unix; }
  // Written on this host by a process that no longer runs.
  bool abandoned_here() const;
  // Expired, or abandoned here: nothing relies on it any more.
  bool stale(int64_t now_unix) const { return expired(now_unix) || abandoned_here(); }
};

struct LeaseOptions {
  // Expiry, counted from each write: how long a lease of a process that died
  // on another host holds others back (documented in docs/maintenance.md).
  std::chrono::seconds ttl{15 * 60};
  std::chrono::seconds refresh{3 * 60};  // rewrite this often while held
  UnixClock clock = unix_now;
  // Written once, never rewritten or removed (credentials that may only
  // create); it lasts `ttl` and expires on its own.
  bool append_only = false;

  // The leases of a run: append-only ones last a day (docs/immutable.md).
  static LeaseOptions for_access(bool append_only);
};

std::string lease_key(std::string_view prefix, const Id& lease);

class Lease {
 public:
  // Writes a new lease under `prefix` and refreshes it on a thread (unless append-only).
  Lease(targets::Target& target, const Key256& key, std::string_view prefix, LeaseOptions options = {});
  ~Lease();  // stops refreshing and removes the object (best effort: it expires anyway)
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  LeaseRecord record() const;
  // Throws Error(kFailure) unless the lease is valid for a while yet: when
  // refreshes have failed for most of the ttl, others may soon treat it as
  // expired, and work that relies on it must not commit.
  void check_held() const;

 private:
  void write(int64_t now);
  void refresh_loop();

  targets::Target& target_;
  const Key256& key_;
  std::string prefix_;
  LeaseOptions options_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  LeaseRecord record_;  // as last written successfully
  std::thread refresher_;
};

// Every lease under `prefix`, expired ones included. Foreign names and
// objects that vanish while listed are skipped; one that does not open is
// listed as expired (expires_unix 0), its host naming the damage.
std::vector<LeaseRecord> list_leases(targets::Target& target, const Key256& key, std::string_view prefix);

// Removes the leases under locks/ and running/ that `which` picks (e.g.
// stale(now), abandoned_here()); returns them. Throws what listing or
// removing throws.
std::vector<LeaseRecord> remove_leases(targets::Target& target, const Key256& key,
                                       const std::function<bool(const LeaseRecord&)>& which);

// Throws Error(kTargetIo) naming `command` unless the credentials may delete
// on `target`: credentials that may only create (append-only) could not
// remove a lock again, nor anything a maintenance run deletes. It removes a
// key under locks/ that does not exist, which the store refuses without
// delete permission and otherwise changes nothing (a versioned bucket gains
// a delete marker, as it does for every lease removed).
void require_delete_permission(targets::Target& target, std::string_view command);

// Takes the exclusive maintenance lock. Credentials that may not delete are
// refused first (require_delete_permission): the lock would stay behind.
// Stale locks are removed; an unexpired one held by someone else refuses
// with Error(kLocked) naming its holder. Two runs racing for it both write
// theirs, look again, and the one with the later (created, id) backs off.
std::unique_ptr<Lease> acquire_lock(targets::Target& target, const Key256& key, LeaseOptions options = {});

}  // namespace keel::engine
