#include "cli/prune_cli.h"

#include <cstdio>

#include "cli/format.h"
#include "cli/parse.h"
#include "engine/catalog_copy.h"

namespace keel::cli {
namespace {

std::string percent(uint64_t part, uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

std::string why(const engine::PackDecision& d) {
  using engine::PackAction;
  switch (d.action) {
    case PackAction::kCondemn: return "no blob in use";
    case PackAction::kRepack: return percent(d.live_bytes, d.size) + " in use";
    case PackAction::kDelete: return "condemned " + local_time(d.condemned_unix * 1'000'000'000) + ", still unused";
    case PackAction::kResurrect: return "a snapshot uses it again";
    case PackAction::kWait: {
      std::string s = "grace until " + local_time(d.deletable_unix * 1'000'000'000);
      if (d.waiting_for_backups > 0) s += ", " + std::to_string(d.waiting_for_backups) + " backup(s) running since condemned";
      return s;
    }
  }
  return "";
}

}  // namespace

void add_prune_options(po::options_description& opts, PruneFlags& flags) {
  opts.add_options()
      ("grace", po::value(&flags.grace)->default_value(flags.grace),
       "delete condemned packs only this long after they were condemned (0: condemn and delete in one run)")
      ("repack-threshold", po::value(&flags.repack_threshold)->default_value(flags.repack_threshold),
       "repack packs with less than this share in use (0 never repacks)")
      ("max-repack", po::value(&flags.max_repack), "repack at most this many bytes of packs per run (e.g. 10G)");
}

engine::PruneOptions prune_options(const PruneFlags& flags, bool dry_run) {
  engine::PruneOptions options;
  options.grace = parse_duration(flags.grace, "--grace");
  options.repack_threshold = parse_fraction(flags.repack_threshold, "--repack-threshold", /*allow_zero=*/true);
  if (!flags.max_repack.empty()) options.max_repack = parse_size(flags.max_repack, "--max-repack");
  options.dry_run = dry_run;
  options.cancel = &App::cancel;
  return options;
}

ProgressStatus prune_status(const engine::PruneProgress& progress) {
  ProgressStatus s;
  s.phase = engine::prune_phase_name(progress.phase.load());
  s.counts.push_back({"snapshots", progress.snapshots_marked.load(), progress.snapshots_total.load()});
  s.counts.push_back({"packs", progress.packs_settled.load(), progress.packs_to_settle.load()});
  s.bytes = progress.bytes_repacked.load();
  s.bytes_total = progress.bytes_to_repack.load();
  s.bytes_label = "repacked";
  return s;
}

void print_prune(const App& app, const engine::PruneResult& r) {
  for (const std::string& w : r.warnings) app.warn("keel: warning: " + w);
  const char* would = r.dry_run ? "would " : "";
  if (r.dry_run) {
    for (const engine::CondemnationSeen& c : r.condemnations) {
      std::printf("record   %s  from %s: dated %s, written %s, grace from %s, %zu packs\n", c.id.short_hex().c_str(),
                  c.host.c_str(), local_time(c.claimed_unix * 1'000'000'000).c_str(),
                  local_time(c.modified_unix * 1'000'000'000).c_str(),
                  local_time(c.grace_from_unix * 1'000'000'000).c_str(), c.packs);
    }
    for (const engine::PackDecision& d : r.decisions) {
      std::printf("%s%-9s %s  %10s  %s\n", would, engine::pack_action_name(d.action), d.pack.short_hex().c_str(),
                  human_bytes(d.size).c_str(), why(d).c_str());
    }
  }
  app.say("marked " + std::to_string(r.snapshots) + " snapshots: " + std::to_string(r.live_blobs) + " of " +
          std::to_string(r.blobs) + " blobs in use, " + std::to_string(r.packs) + " packs (" + human_bytes(r.pack_bytes) +
          "), " + human_duration(r.seconds));
  app.say(std::string(r.dry_run ? "would condemn " : "condemned ") + std::to_string(r.packs_condemned) +
          " packs, " + (r.dry_run ? "would repack " : "repacked ") + std::to_string(r.packs_repacked) + " (" +
          human_bytes(r.bytes_repacked) + " copied into " + std::to_string(r.packs_written) + " new packs)");
  app.say(std::string(r.dry_run ? "would delete " : "deleted ") + std::to_string(r.packs_deleted) + " packs (" +
          human_bytes(r.bytes_deleted) + "), " + std::to_string(r.packs_waiting) + " waiting (" +
          human_bytes(r.bytes_waiting) + "), " + std::to_string(r.packs_resurrected) + " back in use; " +
          std::to_string(r.running_backups) + " backups running");
  if (r.packs_locked > 0 || r.packs_lock_extended > 0) {
    app.say("object lock: " + std::to_string(r.packs_locked) + " condemned packs wait for their lock to end, " +
            std::to_string(r.packs_lock_extended) + " packs in use locked longer");
  }
  if (r.catalog_copies_removed > 0) {
    app.say("removed " + std::to_string(r.catalog_copies_removed) + " old catalog copies (each catalog keeps its newest " +
            std::to_string(engine::kKeptCopies) + ")");
  }
  if (r.unindexed_references > 0) {
    app.warn("keel: warning: snapshots use " + std::to_string(r.unindexed_references) +
             " chunks that no indexed pack holds: run keel check");
  }
}

void prune_json(Json& j, const engine::PruneResult& r) {
  j.begin_object()
      .field("dry_run", r.dry_run)
      .field("snapshots", r.snapshots)
      .field("blobs", r.blobs)
      .field("live_blobs", r.live_blobs)
      .field("trees_walked", r.trees_walked)
      .field("unindexed_references", r.unindexed_references)
      .field("packs", r.packs)
      .field("pack_bytes", r.pack_bytes)
      .field("packs_condemned", r.packs_condemned)
      .field("packs_repacked", r.packs_repacked)
      .field("packs_written", r.packs_written)
      .field("packs_deleted", r.packs_deleted)
      .field("packs_waiting", r.packs_waiting)
      .field("packs_resurrected", r.packs_resurrected)
      .field("packs_locked", r.packs_locked)
      .field("packs_lock_extended", r.packs_lock_extended)
      .field("bytes_repacked", r.bytes_repacked)
      .field("bytes_written", r.bytes_written)
      .field("bytes_deleted", r.bytes_deleted)
      .field("bytes_waiting", r.bytes_waiting)
      .field("running_backups", static_cast<uint64_t>(r.running_backups))
      .field("stale_uploads_removed", static_cast<uint64_t>(r.stale_uploads_removed))
      .field("catalog_copies_removed", static_cast<uint64_t>(r.catalog_copies_removed))
      .field("mark_memory_bytes", r.mark_memory_bytes)
      .field("seconds", r.seconds)
      .field("warnings", r.warnings);
  j.key("decisions").begin_array();
  for (const engine::PackDecision& d : r.decisions) {
    j.begin_object()
        .field("pack", d.pack.hex())
        .field("action", engine::pack_action_name(d.action))
        .field("size", d.size)
        .field("live_bytes", d.live_bytes);
    if (d.condemned_unix) j.field("condemned", iso_time(d.condemned_unix * 1'000'000'000));
    if (d.deletable_unix) j.field("deletable", iso_time(d.deletable_unix * 1'000'000'000));
    if (d.action == engine::PackAction::kWait) j.field("waiting_for_backups", static_cast<uint64_t>(d.waiting_for_backups));
    if (d.condemnation) j.field("condemnation", d.condemnation->hex());
    j.end_object();
  }
  j.end_array();
  // Each record's claimed date beside the store's Last-Modified (docs/immutable.md).
  j.key("condemnations").begin_array();
  for (const engine::CondemnationSeen& c : r.condemnations) {
    j.begin_object()
        .field("id", c.id.hex())
        .field("host", c.host)
        .field("claimed", iso_time(c.claimed_unix * 1'000'000'000))
        .field("written", iso_time(c.modified_unix * 1'000'000'000))
        .field("grace_from", iso_time(c.grace_from_unix * 1'000'000'000))
        .field("packs", static_cast<uint64_t>(c.packs))
        .field("waiting_for_backups", static_cast<uint64_t>(c.waiting_for_backups))
        .end_object();
  }
  j.end_array().end_object();
}

}  // namespace keel::cli
