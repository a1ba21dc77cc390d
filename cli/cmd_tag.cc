#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json.h"
#include "engine/snapshot_tags.h"
#include "util/error.h"

namespace keel::cli {

int cmd_tag(App& app, const Args& args) {
  std::vector<std::string> specs, set, add, remove;
  po::options_description opts(
      "keel tag SNAPSHOT... [--add TAG] [--remove TAG] [--set TAG]: change snapshots' tags. The tags are part of "
      "the snapshot record in the repository: a retagged snapshot is saved under a new id and the old record "
      "removed (as restic does), so every host's catalog sees the change");
  opts.add_options()
      ("snapshot", po::value(&specs)->composing(), "snapshot id or 'latest' (repeatable)")
      ("add", po::value(&add)->composing(), "add this tag (repeatable)")
      ("remove", po::value(&remove)->composing(), "remove this tag (repeatable)")
      ("set", po::value(&set)->composing(), "replace all tags with these (repeatable; --set '' clears them)");
  po::positional_options_description pos;
  pos.add("snapshot", -1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (specs.empty()) throw Error(ErrorKind::kUsage, "tag needs at least one SNAPSHOT");
  engine::TagChange change;
  if (vm.count("set")) change.set = set;
  change.add = add;
  change.remove = remove;
  if (!change.set && add.empty() && remove.empty()) throw Error(ErrorKind::kUsage, "give --add, --remove or --set");

  app.refuse_if_append_only("keel tag", "rewrites snapshot records and deletes the old ones");
  auto repo = app.open_repository("keel tag");
  std::vector<catalog::SnapshotRecord> snapshots;
  for (const std::string& spec : specs) snapshots.push_back(repo->find_snapshot(spec));
  Json j;
  j.begin_array();
  for (const catalog::SnapshotRecord& snapshot : snapshots) {
    const catalog::SnapshotRecord now = engine::retag_snapshot(*repo, snapshot, change);
    if (app.global.json) {
      j.begin_object()
          .field("previous_id", snapshot.id.hex())
          .field("id", now.id.hex())
          .field("changed", now.id != snapshot.id)
          .field("tags", now.tags)
          .end_object();
    } else if (now.id == snapshot.id) {
      app.say("snapshot " + snapshot.id.short_hex() + ": tags unchanged");
    } else {
      app.say("snapshot " + snapshot.id.short_hex() + " is now " + now.id.short_hex() + " with tags [" +
              comma_joined(now.tags) + "]");
    }
  }
  j.end_array();
  if (app.global.json) std::cout << j.str() << "\n";
  return 0;
}

}  // namespace keel::cli
