#include <iostream>

#include "cli/commands.h"
#include "cli/json.h"
#include "cli/parse.h"
#include "engine/repair.h"
#include "engine/undelete.h"
#include "targets/open_versioned_store.h"
#include "util/error.h"

namespace keel::cli {
namespace {

// "2026-11-26T10:00:00Z", or a duration before now ("6h", "2d").
int64_t parse_since(const std::string& text) {
  if (std::optional<int64_t> at = targets::parse_iso8601_utc(text)) return *at;
  return targets::unix_now() - parse_duration(text, "--since").count();
}

int undelete(App& app, bool apply, const std::string& since, bool bypass_governance) {
  engine::UndeleteOptions options{.password = app.password(),
                                  .dry_run = !apply,
                                  .since_unix = since.empty() ? std::nullopt : std::optional(parse_since(since)),
                                  .bypass_governance = bypass_governance,
                                  .cancel = &App::cancel};
  std::unique_ptr<targets::VersionedStore> versions = targets::open_versioned_store(app.global.repo, app.global.target);
  engine::UndeleteResult result = engine::undelete(*versions, options);
  // What the catalog of this host knew is stale now: the objects back are read again.
  std::string rebuild_error;
  if (apply && !result.restored.empty()) {
    try {
      app.open_repository()->rebuild_catalog();
    } catch (const Error& e) {
      rebuild_error = e.what();
    }
  }
  if (app.global.json) {
    Json j;
    j.begin_object().field("dry_run", !apply).key("removed").begin_array();
    for (const engine::UndeleteStep& step : result.steps) {
      j.begin_object()
          .field("key", step.key)
          .field("version_id", step.version_id)
          .field("delete_marker", step.delete_marker)
          .field("modified", targets::iso8601_utc(step.modified_unix))
          .field("reason", step.reason);
      if (!step.error.empty()) j.field("error", step.error);
      j.end_object();
    }
    j.end_array()
        .field("restored", result.restored)
        .field("skipped", result.skipped)
        .field("versions_checked", result.versions_checked);
    if (!rebuild_error.empty()) j.field("catalog_error", rebuild_error);
    std::cout << j.end_object().str() << "\n";
  } else {
    for (const engine::UndeleteStep& step : result.steps) {
      std::string line = std::string(!apply ? "would remove " : step.error.empty() ? "removed " : "could not remove ") +
                         (step.delete_marker ? "delete marker " : "version ") + step.version_id + " of " + step.key +
                         " (" + targets::iso8601_utc(step.modified_unix) + ")" +
                         (step.delete_marker ? "" : ": " + step.reason);
      if (step.error.empty()) {
        app.say(line);
      } else {
        app.warn(line + ": " + step.error);
      }
    }
    for (const std::string& skipped : result.skipped) app.warn("left as it is: " + skipped);
    if (!rebuild_error.empty()) app.warn("the catalog was not rebuilt: " + rebuild_error);
    app.say(std::to_string(result.restored.size()) + " objects " + (apply ? "brought back" : "to bring back") + " (" +
            std::to_string(result.steps.size()) + " delete markers and versions " + (apply ? "removed" : "to remove") +
            ", " + std::to_string(result.versions_checked) + " versions verified)" +
            (apply && !result.restored.empty() && rebuild_error.empty() ? "; catalog rebuilt" : "") +
            (apply || result.steps.empty() ? "" : "; run again with --apply to remove them"));
  }
  if (!apply) return result.steps.empty() && result.skipped.empty() ? 0 : static_cast<int>(ErrorKind::kIntegrity);
  const bool partial = result.refused() || !result.skipped.empty() || !rebuild_error.empty();
  return partial ? static_cast<int>(ErrorKind::kPartial) : 0;
}

}  // namespace

int cmd_repair(App& app, const Args& args) {
  bool dry_run = false, undelete_mode = false, apply = false, bypass_governance = false;
  std::string since;
  po::options_description opts(
      "keel repair [--dry-run]: move damaged objects aside to damaged/ on the target, salvage the intact blobs of "
      "damaged packs, rebuild the catalog from the rest, and list what is lost by snapshot and path.\n"
      "keel repair --undelete [--apply] [--since TIME] [--bypass-governance]: on a versioned or Object Lock bucket, "
      "bring back objects that a delete (a delete marker) or an overwrite (a newer version failing keel's "
      "verification) hid: remove those markers and versions above each object's newest good version. Reports "
      "what it would remove unless --apply is given");
  opts.add_options()("dry-run,n", po::bool_switch(&dry_run), "only report what would be done (--undelete: the default)")(
      "undelete", po::bool_switch(&undelete_mode),
      "remove delete markers and failing versions hiding the repository's objects (versioned S3 buckets)")(
      "apply", po::bool_switch(&apply), "--undelete: remove them (without it, only report)")(
      "since", po::value(&since),
      "--undelete: only markers and versions written since TIME (2026-11-26T10:00:00Z, or a duration ago: 6h, 2d); "
      "a key hidden earlier is left as it is and listed")(
      "bypass-governance", po::bool_switch(&bypass_governance),
      "--undelete: remove versions under a GOVERNANCE lock too (x-amz-bypass-governance-retention; "
      "needs s3:BypassGovernanceRetention)");
  po::variables_map vm;
  if (!app.parse(args, opts, {}, vm)) return 0;
  if (!undelete_mode && (apply || !since.empty() || bypass_governance)) {
    throw Error(ErrorKind::kUsage, "keel repair: --apply, --since and --bypass-governance go with --undelete");
  }
  if (undelete_mode) {
    if (apply && dry_run) throw Error(ErrorKind::kUsage, "keel repair --undelete: --apply and --dry-run contradict each other");
    if (apply) app.refuse_if_append_only("keel repair --undelete --apply", "deletes versions");
    return undelete(app, apply, since, bypass_governance);
  }
  if (!dry_run) app.refuse_if_append_only("keel repair", "moves damaged objects aside (deletes them)");
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
