#include <iostream>

#include "cli/commands.h"
#include "cli/json.h"
#include "engine/repair.h"
#include "util/error.h"

namespace keel::cli {

int cmd_repair(App& app, const Args& args) {
  bool dry_run = false;
  po::options_description opts(
      "keel repair [--dry-run]: move damaged objects aside to damaged/ on the target, salvage the intact blobs of "
      "damaged packs, rebuild the catalog from the rest, and list what is lost by snapshot and path");
  opts.add_options()("dry-run,n", po::bool_switch(&dry_run), "only report what would be moved and what is lost");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  auto repo = app.open_repository("keel repair");
  engine::RepairResult result = engine::repair(*repo, {.dry_run = dry_run, .cancel = &App::cancel});
  if (app.global.json) {
    Json j;
    j.begin_object().field("dry_run", dry_run).key("damaged").begin_array();
    for (const auto& d : result.damaged) {
      j.begin_object().field("key", d.key).field("moved_to", engine::damaged_key(d.key)).field("reason", d.reason).end_object();
    }
    j.end_array()
        .field("blobs_salvaged", result.blobs_salvaged)
        .field("blobs_lost", result.blobs_lost)
        .field("lost", result.lost)
        .end_object();
    std::cout << j.str() << "\n";
  } else {
    for (const auto& d : result.damaged) {
      app.say((dry_run ? "would move " : "moved ") + d.key + " to " + engine::damaged_key(d.key) + ": " + d.reason);
    }
    for (const auto& lost : result.lost) app.say("lost: " + lost);
    if (result.damaged.empty()) {
      app.say("no damaged objects found");
    } else {
      app.say(std::to_string(result.damaged.size()) + " damaged objects" + (dry_run ? " found" : " moved aside") +
              ", " + std::to_string(result.blobs_salvaged) + " intact blobs salvaged, " +
              std::to_string(result.lost.size()) + " files or listings lost" +
              (dry_run ? "" : "; catalog rebuilt"));
    }
  }
  if (dry_run) return result.damaged.empty() ? 0 : static_cast<int>(ErrorKind::kIntegrity);
  return result.lost.empty() ? 0 : static_cast<int>(ErrorKind::kPartial);
}

}  // namespace keel::cli
