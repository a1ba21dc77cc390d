#include <iostream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/format.h"
#include "cli/prune_cli.h"

namespace keel::cli {

int cmd_prune(App& app, const Args& args) {
  PruneFlags flags;
  bool dry_run = false;
  po::options_description opts(
      "keel prune [options]: reclaim the space of data no snapshot uses. Unused packs are condemned first and "
      "deleted by a later prune once the grace period has passed (backups running meanwhile keep what they use); "
      "packs mostly unused are repacked. Takes the maintenance lock (exit 8 if another prune holds it)");
  add_prune_options(opts, flags);
  opts.add_options()("dry-run,n", po::bool_switch(&dry_run), "show what would be condemned, repacked and deleted");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  engine::PruneOptions options = prune_options(flags, dry_run);
  engine::PruneProgress progress;
  options.progress = &progress;
  if (!dry_run) app.refuse_if_append_only("keel prune", "deletes packs");
  auto repo = app.open_repository("keel prune");
  engine::PruneResult result;
  {
    Progress shown(app, "prune", [&] { return prune_status(progress); });
    result = engine::prune(*repo, options);
  }
  if (app.global.json) {
    Json j;
    prune_json(j, result);
    std::cout << j.str() << "\n";
  } else {
    print_prune(app, result);
  }
  return 0;
}

}  // namespace keel::cli
