#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "engine/snapshot_diff.h"
#include "util/error.h"

namespace keel::cli {

namespace {

// restic's markers: + added, - removed, M content, U metadata only, T type.
char marker(engine::ChangeKind kind) {
  switch (kind) {
    case engine::ChangeKind::kAdded: return '+';
    case engine::ChangeKind::kRemoved: return '-';
    case engine::ChangeKind::kModified: return 'M';
    case engine::ChangeKind::kMetadata: return 'U';
    case engine::ChangeKind::kType: return 'T';
  }
  return '?';
}

}  // namespace

int cmd_diff(App& app, const Args& args) {
  std::string from_spec, to_spec;
  bool no_metadata = false;
  po::options_description opts(
      "keel diff SNAPSHOT_A SNAPSHOT_B: what changed from A to B (from the catalog): + added, - removed, "
      "M content modified, U metadata only (mode, owner, mtime, link target, xattrs), T type changed");
  opts.add_options()
      ("from", po::value(&from_spec), "the older snapshot (id or 'latest')")
      ("to", po::value(&to_spec), "the newer snapshot (id or 'latest')")
      ("no-metadata", po::bool_switch(&no_metadata),
       "leave out entries whose metadata alone changed");
  po::positional_options_description pos;
  pos.add("from", 1).add("to", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (from_spec.empty() || to_spec.empty()) throw Error(ErrorKind::kUsage, "diff needs two snapshots: A B");
  auto repo = app.open_repository("keel diff");
  const catalog::SnapshotRecord from = repo->find_snapshot(from_spec), to = repo->find_snapshot(to_spec);
  Json j;
  j.begin_object().field("from", from.id.hex()).field("to", to.id.hex()).key("changes").begin_array();
  engine::DiffSummary summary = engine::diff_snapshots(*repo, from, to, [&](const engine::FileChange& c) {
    if (no_metadata && c.kind == engine::ChangeKind::kMetadata) return;
    if (app.global.json) {
      j.begin_object()
          .field("path", c.path)
          .field("change", engine::change_kind_name(c.kind))
          .field("type", engine::node_type_name(c.type))
          .field("size_before", c.size_before)
          .field("size_after", c.size_after)
          .field("metadata", c.metadata)
          .end_object();
      return;
    }
    std::string size = c.kind == engine::ChangeKind::kRemoved ? human_bytes(c.size_before) : human_bytes(c.size_after);
    std::printf("%c  %10s  %s%s\n", marker(c.kind), c.type == engine::NodeType::kFile ? size.c_str() : "",
                c.path.c_str(), c.metadata.empty() ? "" : ("  (" + comma_joined(c.metadata) + ")").c_str());
  });
  if (app.global.json) {
    j.end_array()
        .key("summary")
        .begin_object()
        .field("added", summary.added)
        .field("removed", summary.removed)
        .field("modified", summary.modified)
        .field("metadata", summary.metadata)
        .field("type", summary.type)
        .field("bytes_added", summary.bytes_added)
        .field("bytes_removed", summary.bytes_removed)
        .end_object()
        .end_object();
    std::cout << j.str() << "\n";
  } else {
    app.say(std::to_string(summary.added) + " added, " + std::to_string(summary.removed) + " removed, " +
            std::to_string(summary.modified) + " modified, " + std::to_string(summary.metadata) +
            " metadata only, " + std::to_string(summary.type) + " changed type; +" + human_bytes(summary.bytes_added) +
            " -" + human_bytes(summary.bytes_removed));
  }
  return 0;
}

}  // namespace keel::cli
