#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "engine/stats.h"
#include "util/error.h"

namespace keel::cli {

namespace {

void stats_fields(Json& j, const engine::SpaceStats& s) {
  j.field("files", s.files)
      .field("restore_bytes", s.restore_bytes)
      .field("blobs", s.blobs)
      .field("raw_bytes", s.raw_bytes)
      .field("stored_bytes", s.stored_bytes)
      .field("dedup_ratio", s.dedup_ratio())
      .field("compression_ratio", s.compression_ratio())
      .field("missing_blobs", s.missing_blobs);
}

void stats_row(const std::string& label, const std::string& time, const engine::SpaceStats& s) {
  std::printf("%-10s  %-19s  %9llu  %12s  %12s  %12s  %6.2fx  %6.2fx\n", label.c_str(), time.c_str(),
              static_cast<unsigned long long>(s.files), human_bytes(s.restore_bytes).c_str(),
              human_bytes(s.raw_bytes).c_str(), human_bytes(s.stored_bytes).c_str(), s.dedup_ratio(),
              s.compression_ratio());
}

}  // namespace

int cmd_stats(App& app, const Args& args) {
  std::vector<std::string> specs;
  po::options_description opts(
      "keel stats [SNAPSHOT...]: space figures from the catalog, per snapshot and for the repository: RESTORE is "
      "what a restore writes, UNIQUE the deduplicated plaintext of the chunks and trees referenced (each once), "
      "STORED their compressed and encrypted size in packs; DEDUP = RESTORE / UNIQUE, COMPRESSION = UNIQUE / STORED");
  opts.add_options()("snapshot", po::value(&specs)->composing(), "snapshot id or 'latest' (default: all)");
  po::positional_options_description pos;
  pos.add("snapshot", -1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  auto repo = app.open_repository("keel stats");
  std::vector<catalog::SnapshotRecord> snapshots;
  if (specs.empty()) {
    snapshots = repo->catalog().list_snapshots();
  } else {
    for (const std::string& spec : specs) snapshots.push_back(repo->find_snapshot(spec));
  }
  const engine::SpaceStats total = engine::combined_stats(*repo, snapshots);
  uint64_t pack_bytes = 0, packs = 0;
  for (const catalog::PackRecord& p : repo->catalog().list_packs()) {
    pack_bytes += p.size;
    ++packs;
  }
  if (app.global.json) {
    Json j;
    j.begin_object().key("snapshots").begin_array();
    for (const catalog::SnapshotRecord& s : snapshots) {
      j.begin_object().field("id", s.id.hex()).field("time", iso_time(s.time_ns));
      stats_fields(j, engine::snapshot_stats(*repo, s));
      j.end_object();
    }
    j.end_array().key("total").begin_object().field("snapshots", total.snapshots);
    stats_fields(j, total);
    j.end_object().field("packs", packs).field("pack_bytes", pack_bytes).end_object();
    std::cout << j.str() << "\n";
    return 0;
  }
  std::printf("%-10s  %-19s  %9s  %12s  %12s  %12s  %7s  %7s\n", "ID", "TIME", "FILES", "RESTORE", "UNIQUE", "STORED",
              "DEDUP", "COMPR.");
  for (const catalog::SnapshotRecord& s : snapshots) {
    stats_row(s.id.short_hex(), local_time(s.time_ns), engine::snapshot_stats(*repo, s));
  }
  stats_row("total", std::to_string(total.snapshots) + " snapshots", total);
  std::printf("repository: %llu packs, %s on the target\n", static_cast<unsigned long long>(packs),
              human_bytes(pack_bytes).c_str());
  if (total.missing_blobs) {
    app.warn("keel: " + std::to_string(total.missing_blobs) + " referenced blobs are not in the index (run keel check)");
  }
  return 0;
}

}  // namespace keel::cli
