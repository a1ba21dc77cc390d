#include "engine/object_lock.h"

#include <algorithm>
#include <set>
#include <vector>

#include "engine/live_blobs.h"
#include "engine/pack.h"
#include "util/error.h"

namespace keel::engine {

namespace {

std::chrono::seconds renewal_margin(const ObjectLockConfig& lock) { return lock.period / 10; }

}  // namespace

targets::WriteRetention write_retention(const ObjectLockConfig& lock) {
  return {lock.mode, lock.period + renewal_margin(lock), {"locks/", "running/", "condemned/", "damaged/"}};
}

RetentionRenewal renew_pack_retention(Repository& repo, std::span<const Id> packs) {
  RetentionRenewal out;
  const std::optional<ObjectLockConfig>& lock = repo.config().object_lock;
  if (!lock || packs.empty()) return out;
  const int64_t now = targets::unix_now();
  const int64_t needed = now + lock->period.count();
  std::set<Id> wanted(packs.begin(), packs.end());
  for (const catalog::PackRecord& p : repo.catalog().list_packs()) {
    if (!wanted.count(p.id) || (p.retain_until_unix && *p.retain_until_unix >= needed)) continue;
    ++out.packs_needed;
    const std::string key = pack_key(p.id);
    ++out.packs_checked;
    const std::optional<targets::ObjectInfo> info = repo.target().head(key);
    if (!info) continue;  // deleted meanwhile (a prune elsewhere): check reports what is missing
    if (info->retention && info->retention->until_unix >= needed) {
      repo.catalog().set_retain_until(p.id, info->retention->until_unix);
      continue;
    }
    const targets::Retention extended{lock->mode, now + (lock->period + renewal_margin(*lock)).count()};
    repo.target().extend_retention(key, extended);
    repo.catalog().set_retain_until(p.id, extended.until_unix);
    ++out.packs_extended;
  }
  return out;
}

RetentionRenewal renew_snapshot_retention(Repository& repo, const catalog::SnapshotRecord& snapshot) {
  const std::optional<ObjectLockConfig>& lock = repo.config().object_lock;
  if (!lock || repo.catalog().packs_locked_less_than(targets::unix_now() + lock->period.count()) == 0) return {};
  const std::vector<catalog::PackRecord> packs = repo.catalog().list_packs();
  LiveBlobs live(repo.catalog(), packs);
  live.mark(repo, snapshot);
  const std::vector<LiveBlobs::PackUse> use = live.pack_use();
  std::vector<Id> used;
  for (size_t i = 0; i < packs.size(); ++i) {
    if (use[i].live_blobs > 0) used.push_back(packs[i].id);
  }
  return renew_pack_retention(repo, used);
}

std::optional<targets::Retention> active_retention(Repository& repo, const std::string& key) {
  const std::optional<targets::ObjectInfo> info = repo.target().head(key);
  if (!info || !info->retention || !info->retention->locked_at(targets::unix_now())) return std::nullopt;
  return info->retention;
}

std::vector<std::string> find_short_retention(Repository& repo) {
  std::vector<std::string> problems;
  const std::optional<ObjectLockConfig>& lock = repo.config().object_lock;
  if (!lock) return problems;
  const auto check = [&](const std::string& key, const std::string& what, int64_t needed) {
    const std::optional<targets::ObjectInfo> info = repo.target().head(key);
    if (!info) return std::optional<int64_t>();  // missing: the rest of check reports it
    const int64_t until = info->retention ? info->retention->until_unix : 0;
    if (until < needed) {
      problems.push_back(what + " (" + key + ") is locked " +
                         (until ? "only until " + targets::iso8601_utc(until) : std::string("not at all")) +
                         ", its snapshots need " + targets::iso8601_utc(needed) +
                         " (keel prune or the next backup extends it)");
    }
    return std::optional<int64_t>(until);
  };
  std::vector<catalog::SnapshotRecord> snapshots = repo.catalog().list_snapshots();
  std::sort(snapshots.begin(), snapshots.end(), [](const auto& a, const auto& b) { return a.time_ns > b.time_ns; });
  const std::vector<catalog::PackRecord> packs = repo.catalog().list_packs();
  LiveBlobs live(repo.catalog(), packs);
  std::vector<bool> seen(packs.size());
  for (const catalog::SnapshotRecord& s : snapshots) {
    const int64_t needed = s.time_ns / 1'000'000'000 + lock->period.count();
    check(snapshot_key(s.id), "snapshot " + s.id.short_hex(), needed);
    // Newest first: a pack is judged by the newest snapshot that uses it.
    live.mark(repo, s);
    const std::vector<LiveBlobs::PackUse> use = live.pack_use();
    for (size_t i = 0; i < packs.size(); ++i) {
      if (seen[i] || use[i].live_blobs == 0) continue;
      seen[i] = true;
      if (std::optional<int64_t> until = check(pack_key(packs[i].id), "pack " + packs[i].id.short_hex(), needed)) {
        if (*until > 0) repo.catalog().set_retain_until(packs[i].id, *until);
      }
    }
  }
  return problems;
}

bool still_locked_since(const Repository& repo, int64_t written_unix) {
  const std::optional<ObjectLockConfig>& lock = repo.config().object_lock;
  return lock && written_unix + write_retention(*lock).period.count() > targets::unix_now();
}

bool remove_unless_locked(Repository& repo, const std::string& key) {
  try {
    repo.target().remove(key);
    return true;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kLocked) throw;
    return false;
  }
}

void refuse_if_snapshot_locked(Repository& repo, const catalog::SnapshotRecord& snapshot) {
  if (!repo.config().object_lock) return;
  if (std::optional<targets::Retention> retention = active_retention(repo, snapshot_key(snapshot.id))) {
    targets::throw_locked("snapshot " + snapshot.id.short_hex() + " (" + repo.target().describe() +
                              snapshot_key(snapshot.id) + ")",
                          *retention);
  }
}

}  // namespace keel::engine
