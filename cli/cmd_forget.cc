#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/number_option.h"
#include "cli/format.h"
#include "cli/json.h"
#include "cli/prune_cli.h"
#include "engine/forget.h"
#include "engine/lease.h"
#include "util/error.h"

namespace keel::cli {
namespace {

std::string joined(const std::vector<std::string>& values, const char* separator) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : separator) + v;
  return out;
}

engine::GroupBy parse_group_by(const std::string& text) {
  if (text == "host,paths" || text == "paths,host") return engine::GroupBy::kHostAndPaths;
  if (text == "host") return engine::GroupBy::kHost;
  if (text == "none") return engine::GroupBy::kNone;
  throw Error(ErrorKind::kUsage, "--group-by '" + text + "': give host,paths, host or none");
}

void print_decisions(const std::vector<engine::ForgetDecision>& decisions, engine::GroupBy group_by, bool dry_run) {
  std::string group;
  for (const engine::ForgetDecision& d : decisions) {
    const catalog::SnapshotRecord& s = d.snapshot;
    std::string this_group = group_by == engine::GroupBy::kNone ? "all snapshots"
                             : group_by == engine::GroupBy::kHost
                                 ? "host " + s.host
                                 : "host " + s.host + ", paths " + joined(s.paths, ",");
    if (this_group != group) {
      std::printf("%s%s:\n", group.empty() ? "" : "\n", this_group.c_str());
      group = this_group;
    }
    std::string tags = s.tags.empty() ? "" : "  [" + joined(s.tags, ",") + "]";
    const char* verdict = d.keep ? "keep" : dry_run ? "would remove" : "remove";
    std::printf("  %-12s %s  %s%s%s%s\n", verdict, s.id.short_hex().c_str(), local_time(s.time_ns).c_str(), tags.c_str(),
                d.keep ? "  " : "", joined(d.reasons, ", ").c_str());
  }
}

}  // namespace

int cmd_forget(App& app, const Args& args) {
  engine::RetentionPolicy policy;
  engine::SnapshotSelection selection;
  std::vector<std::string> jobs, specs;
  std::string group_by = "host,paths";
  bool dry_run = false, and_prune = false;
  PruneFlags prune_flags;
  po::options_description opts(
      "keel forget [policy] [selection] | keel forget SNAPSHOT...: remove snapshots a retention policy does not keep, "
      "or the snapshots named (their data is reclaimed by keel prune). A snapshot kept by any rule is kept; rules "
      "apply per group (host and paths). In an Object Lock repository a policy keeps the snapshots still locked "
      "(listed with their retain-until date); naming a locked snapshot is refused (exit 8), nothing removed");
  opts.add_options()
      ("snapshot", po::value(&specs)->composing(), "remove this snapshot: an id, a unique prefix or 'latest' (repeatable; no policy then)")
      ("keep-last", count_option(&policy.last, "--keep-last", 0, kMaxKeepCount), "keep the N newest snapshots")
      ("keep-hourly", count_option(&policy.hourly, "--keep-hourly", 0, kMaxKeepCount), "keep the newest snapshot of each of the last N hours that have one")
      ("keep-daily", count_option(&policy.daily, "--keep-daily", 0, kMaxKeepCount), "... of each of the last N days")
      ("keep-weekly", count_option(&policy.weekly, "--keep-weekly", 0, kMaxKeepCount), "... of each of the last N ISO weeks (Monday first)")
      ("keep-monthly", count_option(&policy.monthly, "--keep-monthly", 0, kMaxKeepCount), "... of each of the last N months")
      ("keep-yearly", count_option(&policy.yearly, "--keep-yearly", 0, kMaxKeepCount), "... of each of the last N years (all in local time)")
      ("keep-tag", po::value(&policy.keep_tags)->composing(), "always keep snapshots with this tag (repeatable)")
      ("host", po::value(&selection.hosts)->composing(), "only snapshots of this host (repeatable: any of them)")
      ("tag", po::value(&selection.tags)->composing(), "only snapshots with this tag (repeatable: all of them)")
      ("job", po::value(&jobs)->composing(), "only snapshots of this job (same as --tag job:NAME)")
      ("path", po::value(&selection.paths)->composing(), "only snapshots of this path (repeatable: all of them)")
      ("group-by", po::value(&group_by)->default_value(group_by), "apply the policy per host,paths, per host, or none")
      ("dry-run,n", po::bool_switch(&dry_run), "show what would be removed and why the rest is kept")
      ("prune", po::bool_switch(&and_prune), "run keel prune afterwards (takes the prune options below)");
  add_prune_options(opts, prune_flags);
  po::positional_options_description pos;
  pos.add("snapshot", -1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  for (const std::string& job : jobs) selection.tags.push_back("job:" + job);
  engine::GroupBy grouping = parse_group_by(group_by);
  if (!specs.empty() && (!policy.empty() || !selection.hosts.empty() || !selection.tags.empty() ||
                         !selection.paths.empty())) {
    throw Error(ErrorKind::kUsage, "keel forget: give snapshots or a policy with a selection, not both");
  }
  if (specs.empty()) engine::plan_forget({}, selection, policy, grouping);  // refuses an empty policy before asking for a password
  engine::PruneOptions prune_options_parsed = prune_options(prune_flags, dry_run);
  engine::PruneProgress progress;
  prune_options_parsed.progress = &progress;

  if (!dry_run) app.refuse_if_append_only("keel forget", and_prune ? "deletes snapshots and packs" : "deletes snapshots");
  auto repo = app.open_repository("keel forget");
  // Append-only credentials with --prune: refused before a snapshot is
  // touched, and before prune would take a lock they cannot remove. (Plain
  // forget takes no lock; it fails at its first delete, or keeps what
  // Object Lock holds, which says more.)
  if (!dry_run && and_prune) engine::require_delete_permission(repo->target(), "keel forget --prune");
  std::vector<engine::ForgetDecision> decisions =
      specs.empty() ? engine::forget(*repo, selection, policy, grouping, dry_run)
                    : engine::forget_snapshots(*repo, specs, dry_run);
  size_t kept = 0, locked = 0;
  for (const auto& d : decisions) {
    kept += d.keep;
    locked += d.locked.has_value();
  }
  std::optional<engine::PruneResult> pruned;
  if (and_prune) {
    Progress shown(app, "prune", [&] { return prune_status(progress); });
    pruned = engine::prune(*repo, prune_options_parsed);
  }

  if (app.global.json) {
    Json j;
    j.begin_object()
        .field("dry_run", dry_run)
        .field("kept", static_cast<uint64_t>(kept))
        .field("kept_locked", static_cast<uint64_t>(locked))
        .field("removed", static_cast<uint64_t>(decisions.size() - kept));
    j.key("snapshots").begin_array();
    for (const auto& d : decisions) {
      j.begin_object()
          .field("id", d.snapshot.id.hex())
          .field("time", iso_time(d.snapshot.time_ns))
          .field("host", d.snapshot.host)
          .field("paths", d.snapshot.paths)
          .field("tags", d.snapshot.tags)
          .field("keep", d.keep)
          .field("reasons", d.reasons);
      if (d.locked) j.field("locked_until", targets::iso8601_utc(d.locked->until_unix));
      j.end_object();
    }
    j.end_array();
    if (pruned) {
      j.key("prune");
      prune_json(j, *pruned);
    }
    j.end_object();
    std::cout << j.str() << "\n";
    return 0;
  }
  if (!app.global.quiet) print_decisions(decisions, grouping, dry_run);
  app.say(std::string(dry_run ? "would remove " : "removed ") + std::to_string(decisions.size() - kept) +
          " snapshots, kept " + std::to_string(kept) +
          (locked ? " (" + std::to_string(locked) + " of them under Object Lock until their retain-until date)" : ""));
  if (pruned) print_prune(app, *pruned);
  return 0;
}

}  // namespace keel::cli
