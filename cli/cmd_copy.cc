#include <chrono>
#include <iostream>

#include "cli/commands.h"
#include "cli/copy_report.h"
#include "cli/format.h"
#include "cli/json.h"
#include "cli/parse.h"
#include "engine/copy.h"
#include "engine/repository_access.h"
#include "util/error.h"

namespace keel::cli {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t ago_ns(const std::string& text, std::string_view option) {
  return now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(parse_duration(text, option)).count();
}

}  // namespace

int cmd_copy(App& app, const Args& args) {
  engine::RepositoryAccess source;
  source.password_env = "KEEL_FROM_PASSWORD";
  std::vector<std::string> specs;
  std::string newer_than, older_than;
  engine::CopyOptions options;
  po::options_description opts(
      "keel copy --from-repo SOURCE [SNAPSHOT...]: copy snapshots from SOURCE into the repository given by --repo "
      "(the 3-2-1 rule: local -> S3, S3 -> another S3 or a gateway). Only chunks the destination lacks are sent, "
      "sealed under the destination's keys; snapshots copied before are skipped, so running it again resumes a "
      "copy that was killed and keeps an offsite copy current. Both repositories use the S3 options given (--endpoint, "
      "credentials)");
  opts.add_options()
      ("from-repo", po::value(&source.location), "the repository to copy from (a directory or s3://bucket/prefix)")
      ("from-password-file", po::value(&source.password_file),
       "read the source's password from this file (env KEEL_FROM_PASSWORD holds the password itself)")
      ("from-catalog", po::value(&source.catalog), "the source's catalog database (default: its usual path)")
      ("snapshot", po::value(&specs)->composing(), "snapshot id or 'latest' of the source (repeatable; default: all)")
      ("host", po::value(&options.selection.hosts)->composing(), "only snapshots of this host (repeatable: any of them)")
      ("tag", po::value(&options.selection.tags)->composing(), "only snapshots with this tag (repeatable: all of them)")
      ("path", po::value(&options.selection.paths)->composing(), "only snapshots of this path (repeatable: all of them)")
      ("newer-than", po::value(&newer_than), "only snapshots taken within this long (e.g. 7d, 12h)")
      ("older-than", po::value(&older_than), "only snapshots taken longer ago than this")
      ("dry-run,n", po::bool_switch(&options.dry_run), "list what would be copied, copy nothing");
  po::positional_options_description pos;
  pos.add("snapshot", -1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (source.location.empty()) throw Error(ErrorKind::kUsage, "copy needs --from-repo: the repository to copy from");
  if (!newer_than.empty()) options.selection.since_ns = ago_ns(newer_than, "--newer-than");
  if (!older_than.empty()) options.selection.until_ns = ago_ns(older_than, "--older-than");
  source.target = app.repository_access().target;
  if (!source.catalog.empty() && source.catalog == app.repository_access().catalog) {
    throw Error(ErrorKind::kUsage, "--from-catalog and --catalog name the same file: each repository needs its own");
  }

  std::string from_password = engine::stored_password(source).value_or("");
  if (from_password.empty()) from_password = prompt_secret("password of " + source.location + ": ");
  if (from_password.empty()) {
    throw Error(ErrorKind::kUsage, "no password for the source: set KEEL_FROM_PASSWORD, pass --from-password-file, "
                                   "or run on a terminal");
  }
  std::unique_ptr<engine::Repository> from = engine::open_repository(source, from_password);
  std::unique_ptr<engine::Repository> to = app.open_repository();
  from->sync_catalog();
  for (const std::string& spec : specs) options.snapshots.push_back(from->find_snapshot(spec).id);
  options.cancel = &App::cancel;

  engine::CopyProgress progress;
  engine::CopyResult result;
  {
    Progress shown(app, "copy", [&] { return copy_status(progress); });
    result = engine::copy_snapshots(*from, *to, options, progress);
  }

  if (app.global.json) {
    Json j;
    j.begin_object();
    copy_json_fields(j, result, options.dry_run);
    std::cout << j.end_object().str() << "\n";
    return 0;
  }
  for (const engine::CopiedSnapshot& s : result.snapshots) {
    std::string what = s.source.id.short_hex() + "  " + local_time(s.source.time_ns) + "  " + s.source.host + "  " +
                       comma_joined(s.source.paths);
    if (s.existed) {
      app.say("already copied  " + what + "  (as " + s.copy.short_hex() + ")");
    } else if (options.dry_run) {
      app.say("would copy      " + what);
    } else {
      app.say("copied          " + what + "  -> " + s.copy.short_hex());
    }
  }
  if (options.dry_run) {
    app.say(std::to_string(snapshots_copied(result)) + " of " + std::to_string(result.snapshots.size()) +
            " selected snapshots would be copied");
    return 0;
  }
  app.say(copy_summary(result, from->target().describe()));
  return 0;
}

}  // namespace keel::cli
