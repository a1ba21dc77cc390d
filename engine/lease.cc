#include "engine/lease.h"

#include <unistd.h>

#include <ctime>
#include <tuple>

#include "engine/sealed_object.h"
#include "util/codec.h"
#include "util/error.h"
#include "util/host.h"

namespace keel::engine {
namespace {

constexpr std::string_view kLeaseMagic = "KEELLSE1";

Bytes encode_lease(const LeaseRecord& r) {
  Encoder e;
  e.varint(1);  // version
  e.id(r.id);
  e.str(r.host);
  e.svarint(r.pid);
  e.svarint(r.created_unix);
  e.svarint(r.expires_unix);
  return e.take();
}

LeaseRecord decode_lease(ByteView body, const std::string& what) {
  Decoder d(body, what);
  if (d.varint() != 1) d.fail("unsupported lease version");
  LeaseRecord r;
  r.id = d.id();
  r.host = d.str();
  r.pid = d.svarint();
  r.created_unix = d.svarint();
  r.expires_unix = d.svarint();
  d.expect_done();
  return r;
}

std::string utc_time(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  char buf[32];
  if (!gmtime_r(&t, &tm) || std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return std::to_string(unix_seconds);
  }
  return buf;
}

Error locked_by(const LeaseRecord& holder, const targets::Target& target) {
  return Error(ErrorKind::kLocked, target.describe() + " is locked by a maintenance run on " + holder.host + " (pid " +
                                       std::to_string(holder.pid) + ") since " + utc_time(holder.created_unix) +
                                       ", valid until " + utc_time(holder.expires_unix) +
                                       " unless refreshed; wait for it to finish, or, if that process is gone, "
                                       "run keel unlock --all (it removes " +
                                       lease_key(kLockPrefix, holder.id) + ")");
}

}  // namespace

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

LeaseOptions LeaseOptions::for_access(bool append_only) {
  LeaseOptions options;
  if (append_only) {
    options.append_only = true;
    options.ttl = std::chrono::hours(24);
  }
  return options;
}

bool LeaseRecord::abandoned_here() const { return host == local_hostname() && !process_running_here(pid); }

std::string lease_key(std::string_view prefix, const Id& lease) { return std::string(prefix) + lease.hex(); }

Lease::Lease(targets::Target& target, const Key256& key, std::string_view prefix, LeaseOptions options)
    : target_(target), key_(key), prefix_(prefix), options_(std::move(options)) {
  record_.id = Id::random();
  record_.host = local_hostname();
  record_.pid = ::getpid();
  record_.created_unix = options_.clock();
  write(record_.created_unix);
  if (!options_.append_only) refresher_ = std::thread([this] { refresh_loop(); });
}

Lease::~Lease() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (options_.append_only) return;  // it expires on its own
  refresher_.join();
  try {
    target_.remove(lease_key(prefix_, record_.id));
  } catch (const Error&) {
    // It expires on its own.
  }
}

void Lease::write(int64_t now) {
  LeaseRecord next;
  {
    std::lock_guard lock(mu_);
    next = record_;
  }
  next.expires_unix = now + options_.ttl.count();
  target_.put(lease_key(prefix_, next.id), seal_object(kLeaseMagic, key_, encode_lease(next), next.id.view()));
  std::lock_guard lock(mu_);
  record_.expires_unix = next.expires_unix;
}

void Lease::refresh_loop() {
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, options_.refresh, [this] { return stopping_; })) {
    lock.unlock();
    try {
      write(options_.clock());
    } catch (const Error&) {
      // Tried again at the next interval; check_held() tells whether it lapsed.
    }
    lock.lock();
  }
}

LeaseRecord Lease::record() const {
  std::lock_guard lock(mu_);
  return record_;
}

void Lease::check_held() const {
  LeaseRecord r = record();
  int64_t now = options_.clock();
  if (now + options_.ttl.count() / 4 >= r.expires_unix) {
    if (options_.append_only) {
      throw Error(ErrorKind::kFailure, lease_key(prefix_, r.id) + " on " + target_.describe() + " expires at " +
                                           utc_time(r.expires_unix) + " and append-only access cannot renew it; "
                                           "others may soon treat it as expired, so this run stops here");
    }
    throw Error(ErrorKind::kFailure, "could not refresh " + lease_key(prefix_, r.id) + " on " + target_.describe() +
                                         " since before " + utc_time(r.expires_unix - options_.ttl.count()) +
                                         "; others may treat it as expired, so this run stops here");
  }
}

std::vector<LeaseRecord> list_leases(targets::Target& target, const Key256& key, std::string_view prefix) {
  std::vector<LeaseRecord> leases;
  for (const auto& [id, modified_unix] : list_object_ids_modified(target, prefix)) {
    const std::string object_key = lease_key(prefix, id);
    const std::string what = target.describe() + "/" + object_key;
    try {
      std::optional<Bytes> body = read_object(target, object_key, kLeaseMagic, "lease", key, id.view(), what);
      if (!body) continue;  // released meanwhile
      LeaseRecord r = decode_lease(*body, what);
      if (r.id != id) throw Error(ErrorKind::kIntegrity, what + ": record names another lease");
      r.modified_unix = modified_unix;
      leases.push_back(std::move(r));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      // Nobody can tell who holds a damaged lease, nor renew it: it holds
      // nothing back, and the next lock or cleanup removes it.
      LeaseRecord damaged;
      damaged.id = id;
      damaged.modified_unix = modified_unix;
      damaged.host = "? (damaged: " + std::string(e.what()) + ")";
      leases.push_back(std::move(damaged));
    }
  }
  return leases;
}

std::vector<LeaseRecord> remove_leases(targets::Target& target, const Key256& key,
                                       const std::function<bool(const LeaseRecord&)>& which) {
  std::vector<LeaseRecord> removed;
  for (const std::string_view prefix : {kLockPrefix, kRunningPrefix}) {
    for (LeaseRecord& lease : list_leases(target, key, prefix)) {
      if (!which(lease)) continue;
      target.remove(lease_key(prefix, lease.id));
      removed.push_back(std::move(lease));
    }
  }
  return removed;
}

void require_delete_permission(targets::Target& target, std::string_view command) {
  const std::string probe = lease_key(kLockPrefix, Id::random());
  try {
    target.remove(probe);
  } catch (const Error& e) {
    throw Error(ErrorKind::kTargetIo,
                std::string(command) + ": these credentials may not delete objects in " + target.describe() +
                    " (removing " + probe + ", which does not exist, was refused: " + e.what() +
                    "); nothing was changed and no lock taken. Forget, prune, repair and migrate delete: run them "
                    "with the repository owner's credentials (append-only credentials back up, they delete nothing)");
  }
}

std::unique_ptr<Lease> acquire_lock(targets::Target& target, const Key256& key, LeaseOptions options) {
  // Before the lock is written: one these credentials cannot remove would
  // hold off every other maintenance run until it expired.
  require_delete_permission(target, "the maintenance lock");
  int64_t now = options.clock();
  for (const LeaseRecord& other : list_leases(target, key, kLockPrefix)) {
    if (!other.stale(now)) throw locked_by(other, target);
    target.remove(lease_key(kLockPrefix, other.id));  // left by a run that died
  }
  auto lock = std::make_unique<Lease>(target, key, kLockPrefix, std::move(options));
  LeaseRecord mine = lock->record();
  for (const LeaseRecord& other : list_leases(target, key, kLockPrefix)) {
    if (other.id == mine.id || other.stale(now)) continue;
    if (std::tie(other.created_unix, other.id) < std::tie(mine.created_unix, mine.id)) {
      lock.reset();  // the earlier one wins
      throw locked_by(other, target);
    }
  }
  return lock;
}

}  // namespace keel::engine
