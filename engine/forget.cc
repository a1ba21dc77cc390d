#include "engine/forget.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <set>
#include <tuple>

#include "engine/object_lock.h"
#include "util/error.h"

namespace keel::engine {
namespace {

// Sorts by host, then paths: groups come out in that order.
std::pair<std::string, std::vector<std::string>> group_of(const catalog::SnapshotRecord& s, GroupBy group_by) {
  std::vector<std::string> paths = s.paths;
  std::sort(paths.begin(), paths.end());
  switch (group_by) {
    case GroupBy::kHostAndPaths: return {s.host, paths};
    case GroupBy::kHost: return {s.host, {}};
    case GroupBy::kNone: return {};
  }
  return {};
}

// A time bucket rule: how many buckets to keep and how a snapshot's local
// time names its bucket (the name goes into the reason).
struct BucketRule {
  const char* name;
  uint32_t count;
  const char* format;  // strftime; %G-W%V is the ISO week (Monday first)
};

std::string bucket_name(int64_t time_ns, const char* format) {
  // Floor, not truncate, so times before 1970 fall into the right second.
  std::time_t seconds = static_cast<std::time_t>(time_ns / 1'000'000'000 - (time_ns % 1'000'000'000 < 0 ? 1 : 0));
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

// Decides for one group, newest first.
void decide_group(std::vector<ForgetDecision>& group, const RetentionPolicy& policy) {
  std::sort(group.begin(), group.end(), [](const ForgetDecision& a, const ForgetDecision& b) {
    return std::tie(a.snapshot.time_ns, a.snapshot.id) > std::tie(b.snapshot.time_ns, b.snapshot.id);
  });
  auto keep = [](ForgetDecision& d, std::string reason) {
    d.keep = true;
    d.reasons.push_back(std::move(reason));
  };
  for (size_t i = 0; i < group.size() && i < policy.last; ++i) keep(group[i], "last " + std::to_string(i + 1));
  const BucketRule rules[] = {
      {"hourly", policy.hourly, "%Y-%m-%d %Hh"}, {"daily", policy.daily, "%Y-%m-%d"},
      {"weekly", policy.weekly, "%G-W%V"},       {"monthly", policy.monthly, "%Y-%m"},
      {"yearly", policy.yearly, "%Y"},
  };
  for (const BucketRule& rule : rules) {
    std::set<std::string> buckets;
    for (ForgetDecision& d : group) {
      if (buckets.size() == rule.count) break;
      std::string bucket = bucket_name(d.snapshot.time_ns, rule.format);
      if (buckets.insert(bucket).second) keep(d, std::string(rule.name) + " " + bucket);
    }
  }
  for (ForgetDecision& d : group) {
    for (const std::string& tag : policy.keep_tags) {
      if (std::ranges::find(d.snapshot.tags, tag) != d.snapshot.tags.end()) keep(d, "tag " + tag);
    }
  }
}

}  // namespace

bool RetentionPolicy::empty() const {
  return last == 0 && hourly == 0 && daily == 0 && weekly == 0 && monthly == 0 && yearly == 0 && keep_tags.empty();
}

std::vector<ForgetDecision> plan_forget(std::vector<catalog::SnapshotRecord> snapshots, const SnapshotSelection& selection,
                                        const RetentionPolicy& policy, GroupBy group_by) {
  if (policy.empty()) {
    throw Error(ErrorKind::kUsage,
                "no retention rule given: forget would remove every selected snapshot; give at least one of "
                "--keep-last, --keep-hourly, --keep-daily, --keep-weekly, --keep-monthly, --keep-yearly, --keep-tag");
  }
  std::map<std::pair<std::string, std::vector<std::string>>, std::vector<ForgetDecision>> groups;
  for (catalog::SnapshotRecord& s : snapshots) {
    if (!selection.matches(s)) continue;
    auto key = group_of(s, group_by);
    groups[std::move(key)].push_back(ForgetDecision{std::move(s), false, {}});
  }
  std::vector<ForgetDecision> decisions;
  for (auto& [key, group] : groups) {
    decide_group(group, policy);
    std::move(group.begin(), group.end(), std::back_inserter(decisions));
  }
  return decisions;
}

namespace {

// Removes the snapshots `decisions` do not keep: target, catalog, then the log.
void remove_forgotten(Repository& repo, const std::vector<ForgetDecision>& decisions) {
  ChangeLogEntry removed;
  for (const ForgetDecision& d : decisions) {
    if (d.keep) continue;
    repo.target().remove(snapshot_key(d.snapshot.id));
    repo.catalog().remove_snapshot(d.snapshot.id);
    removed.snapshots_removed.push_back(d.snapshot.id);
  }
  repo.log_changes(removed);
}

}  // namespace

std::vector<ForgetDecision> forget(Repository& repo, const SnapshotSelection& selection, const RetentionPolicy& policy,
                                   GroupBy group_by, bool dry_run) {
  // Snapshots other hosts wrote count too: the policy applies to the whole history.
  repo.follow_log();
  std::vector<ForgetDecision> decisions = plan_forget(repo.catalog().list_snapshots(), selection, policy, group_by);
  // Object Lock: a locked snapshot stays until its lock ends, whatever the rules say.
  if (repo.config().object_lock) {
    for (ForgetDecision& d : decisions) {
      if (d.keep) continue;
      d.locked = active_retention(repo, snapshot_key(d.snapshot.id));
      if (!d.locked) continue;
      d.keep = true;
      d.reasons = {std::string("locked (") + targets::lock_mode_name(d.locked->mode) + ") until " +
                   targets::iso8601_utc(d.locked->until_unix)};
    }
  }
  if (!dry_run) remove_forgotten(repo, decisions);
  return decisions;
}

std::vector<ForgetDecision> forget_snapshots(Repository& repo, const std::vector<std::string>& specs, bool dry_run) {
  repo.follow_log();
  std::vector<ForgetDecision> decisions;
  std::set<Id> named;
  for (const std::string& spec : specs) {
    catalog::SnapshotRecord snapshot = repo.find_snapshot(spec);
    if (named.insert(snapshot.id).second) decisions.push_back({std::move(snapshot), false, {}});
  }
  // Nothing is deleted while a snapshot named is locked.
  for (const ForgetDecision& d : decisions) refuse_if_snapshot_locked(repo, d.snapshot);
  if (!dry_run) remove_forgotten(repo, decisions);
  return decisions;
}

}  // namespace keel::engine
