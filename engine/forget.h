// Retention: which snapshots a policy keeps, and forgetting the rest.
//
// Policies follow the usual grandfather-father-son rules: keep the newest
// `last` snapshots, and the newest snapshot of each of the last N hours,
// days, weeks (ISO, Monday first), months and years that have one, in local
// time. A snapshot kept by any rule is kept. Policies apply within groups
// (by default host + paths), so one machine's history never expires
// another's. Snapshots made by a job carry the tag "job:NAME".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "engine/repository.h"
#include "engine/snapshot_selection.h"
#include "targets/retention.h"

namespace keel::engine {

struct RetentionPolicy {
  uint32_t last = 0;
  uint32_t hourly = 0;
  uint32_t daily = 0;
  uint32_t weekly = 0;
  uint32_t monthly = 0;
  uint32_t yearly = 0;
  std::vector<std::string> keep_tags;  // snapshots with any of these are always kept
  bool empty() const;  // no rule at all: forget would remove everything, so it is refused
};

enum class GroupBy { kHostAndPaths, kHost, kNone };

struct ForgetDecision {
  catalog::SnapshotRecord snapshot;
  bool keep = false;
  std::vector<std::string> reasons;  // "last 3", "daily 2026-11-20", "tag pinned"; empty when removed
  // Object Lock: the policy would remove it, but its object is locked (kept,
  // with reason "locked until ...", until the lock ends).
  std::optional<targets::Retention> locked = std::nullopt;
};

// Pure: decides for every selected snapshot; `snapshots` in any order.
// Decisions come back newest first within each group, groups ordered by
// host, then paths. Bucket rules count from the newest snapshot, not from
// now. Throws Error(kUsage) for an empty policy.
std::vector<ForgetDecision> plan_forget(std::vector<catalog::SnapshotRecord> snapshots, const SnapshotSelection& selection,
                                        const RetentionPolicy& policy, GroupBy group_by);

// Plans against the repository's snapshots (after syncing the catalog, so
// other hosts' snapshots count) and, unless dry_run, removes the forgotten
// ones from the target and then the catalog. Data is reclaimed by prune.
// In an Object Lock repository a snapshot the policy would remove whose
// object is still locked is kept instead (ForgetDecision::locked; a HEAD
// each, dry run too). Throws Error(kUsage) for an empty policy.
std::vector<ForgetDecision> forget(Repository& repo, const SnapshotSelection& selection, const RetentionPolicy& policy,
                                   GroupBy group_by, bool dry_run);

// Removes the snapshots `specs` name (ids, unique prefixes, "latest"),
// whatever any policy says. Throws Error(kLocked) naming the date, before
// removing any, if one is under Object Lock; kNotFound for an unknown one.
std::vector<ForgetDecision> forget_snapshots(Repository& repo, const std::vector<std::string>& specs, bool dry_run);

}  // namespace keel::engine
