#include <iostream>

#include "cli/commands.h"
#include "cli/json.h"
#include "engine/migrate.h"
#include "util/error.h"

namespace keel::cli {

int cmd_migrate(App& app, const Args& args) {
  unsigned format = 0;
  po::options_description opts(
      "keel migrate --format 2: convert a format-1 repository to format 2, so that keel key add --put-only can add "
      "keys that write backups but read nothing back (docs/repository-format.md). Needs a full key and the maintenance "
      "lock; packs, trees and snapshots stay as they are (full keys read both kinds), a pack index is written for "
      "each pack. Safe to interrupt: the repository stays format 1 until the last step, and a rerun goes on");
  opts.add_options()("format", po::value(&format), "the format to migrate to: 2");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  if (format != 2) throw Error(ErrorKind::kUsage, "keel migrate needs --format 2 (the only format to migrate to)");
  app.refuse_if_append_only("keel migrate", "rewrites the config and removes condemnation records");
  auto repo = app.open_repository("keel migrate");
  engine::MigrateOptions options;
  options.cancel = &App::cancel;
  const engine::MigrateResult result = engine::migrate_to_format2(*repo, options);
  for (const std::string& w : result.warnings) app.warn("warning: " + w);
  for (const std::string& p : result.not_indexed) app.warn("not indexed: " + p + " (run keel check, then keel repair)");
  const std::string where = repo->target().describe();
  if (app.global.json) {
    Json j;
    j.begin_object()
        .field("format_before", static_cast<uint64_t>(result.format_before))
        .field("format", static_cast<uint64_t>(2))
        .field("switched", result.switched)
        .field("keys_written", result.keys_written)
        .field("packs", result.packs)
        .field("packs_indexed", result.packs_indexed)
        .field("packs_already_indexed", result.packs_already_indexed)
        .field("condemnations_removed", result.condemnations_removed)
        .field("not_indexed", result.not_indexed)
        .end_object();
    std::cout << j.str() << "\n";
  } else if (result.made_as_format2) {
    app.say(where + " is format 2 already (made so by keel init --format 2): nothing to do");
  } else {
    app.say((result.switched ? "migrated " + where + " to format 2"
                             : where + " was migrated to format 2 already: pack indexes completed") +
            ": " + std::to_string(result.packs_indexed) + " pack indexes written, " +
            std::to_string(result.packs_already_indexed) + " already there, of " + std::to_string(result.packs) +
            " packs");
    if (result.condemnations_removed) {
      app.say(std::to_string(result.condemnations_removed) +
              " condemnation record(s) removed: their packs are condemned again by the next prune");
    }
    if (result.switched) app.say("add put-only keys with keel key add --put-only");
  }
  return result.not_indexed.empty() ? 0 : static_cast<int>(ErrorKind::kPartial);
}

}  // namespace keel::cli
