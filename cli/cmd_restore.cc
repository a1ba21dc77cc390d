#include <unistd.h>

#include <chrono>
#include <iostream>

#include "cli/commands.h"
#include "cli/number_option.h"
#include "cli/format.h"
#include "cli/json.h"
#include "cli/restore_report.h"
#include "cli/stage_cpu_report.h"
#include "engine/restore.h"
#include "util/error.h"

namespace keel::cli {

int cmd_restore(App& app, const Args& args) {
  std::string spec, target, to_stdout, overwrite = "always", verify = "on";
  std::vector<std::string> includes;
  bool no_verify = false;
  size_t readers = 0;
  po::options_description opts(
      "keel restore SNAPSHOT[:PATH] --target DIR: restore a snapshot, or the contents of PATH in it");
  opts.add_options()
      ("snapshot", po::value(&spec), "snapshot id or 'latest', optionally :PATH")
      ("target,t", po::value(&target), "directory to restore into")
      ("stdout", po::value(&to_stdout), "write this one file of the snapshot to standard output")
      ("include,i", po::value(&includes)->composing(), "restore only this path of the snapshot (repeatable)")
      ("overwrite", po::value(&overwrite)->default_value(overwrite),
       "existing files: always, if-changed (keep those already correct: resumes an interrupted restore), never")
      ("verify", po::value(&verify)->default_value(verify),
       "check each file's checksum: on (as written, or read back), full (flush, then read back from disk), off")
      ("no-verify", po::bool_switch(&no_verify), "same as --verify=off")
      ("readers", count_option(&readers, "--readers", 0, kMaxReaders)->default_value("0"), "ranged reads in flight (0: adaptive)");
  po::positional_options_description pos;
  pos.add("snapshot", 1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  if (spec.empty()) throw Error(ErrorKind::kUsage, "which snapshot? give an id or 'latest'");
  if (!to_stdout.empty()) {
    if (!target.empty()) throw Error(ErrorKind::kUsage, "give --target or --stdout, not both");
    auto repo = app.open_repository("keel restore");
    engine::stream_file(*repo, repo->find_snapshot(spec), to_stdout, STDOUT_FILENO);
    return 0;
  }
  if (target.empty()) throw Error(ErrorKind::kUsage, "where to? give --target DIR (or --stdout PATH)");

  engine::RestoreOptions options;
  options.target_dir = target;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    options.subpath = spec.substr(colon + 1);
    spec = spec.substr(0, colon);
  }
  for (std::string inc : includes) {
    if (inc.empty() || inc[0] != '/') inc = "/" + inc;
    while (inc.size() > 1 && inc.back() == '/') inc.pop_back();
    options.includes.push_back(inc);
  }
  if (verify != "on" && verify != "off" && verify != "full") throw Error(ErrorKind::kUsage, "--verify must be on, full or off");
  options.verify = !no_verify && verify != "off";
  options.verify_from_disk = options.verify && verify == "full";
  if (overwrite == "always") {
    options.overwrite = engine::Overwrite::kAlways;
  } else if (overwrite == "if-changed") {
    options.overwrite = engine::Overwrite::kIfChanged;
  } else if (overwrite == "never") {
    options.overwrite = engine::Overwrite::kNever;
  } else {
    throw Error(ErrorKind::kUsage, "--overwrite must be always, if-changed or never");
  }
  options.readers = readers;
  options.cancel = &App::cancel;

  auto repo = app.open_repository("keel restore");
  catalog::SnapshotRecord snap = repo->find_snapshot(spec);
  engine::RestoreProgress progress;
  auto start = std::chrono::steady_clock::now();
  engine::RestoreResult result;
  {
    Progress shown(app, "restore", [&] { return restore_status(progress); });
    result = engine::run_restore(*repo, snap, options, progress);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& f : result.failures) app.warn("keel: failed to restore " + f.path + ": " + f.reason);
  // "verified" only where every selected file is in place and checked.
  const bool all_verified = options.verify && result.failures.empty() && result.files_unverified == 0 &&
                            (options.overwrite != engine::Overwrite::kNever || result.files_kept == 0);
  if (app.global.json) {
    Json j;
    j.begin_object()
        .field("snapshot", snap.id.hex())
        .field("target", target)
        .field("files", result.files)
        .field("files_verified", result.files_verified)
        .field("files_unverified", result.files_unverified)
        .field("files_kept", result.files_kept)
        .field("files_failed", result.files_failed)
        .field("partial_files_removed", result.partial_files_removed)
        .field("dirs", result.dirs)
        .field("bytes", result.bytes)
        .field("peak_readers", static_cast<uint64_t>(result.peak_readers))
        .field("seconds", seconds)
        .field("verified", all_verified)
        .field("transfer", repo->target().transfer_stats());
    // CPU seconds by stage, and per GB (10^9 bytes) of the files selected.
    stage_cpu_json_fields(j, engine::kRestoreStages, result.stage_cpu_seconds, result.cpu_seconds,
                          static_cast<double>(result.bytes) / 1e9);
    j.key("failures").begin_array();
    for (const auto& f : result.failures) {
      j.begin_object().field("path", f.path).field("reason", f.reason).field("damaged", f.damaged()).end_object();
    }
    j.end_array().end_object();
    std::cout << j.str() << "\n";
  } else {
    std::vector<std::string> outcome;
    auto count = [&](uint64_t n, const std::string& what) {
      if (n > 0) outcome.push_back(std::to_string(n) + " " + what);
    };
    count(result.files_verified, "verified");
    count(result.files_unverified, "written, not verified");
    count(result.files_kept, options.overwrite == engine::Overwrite::kNever ? "skipped (already there, not checked)"
                                                                            : "kept (already correct)");
    count(result.files_failed, "FAILED");
    count(result.failures.size() - std::min<uint64_t>(result.failures.size(), result.files_failed),
          "other items FAILED (directories, links, metadata)");
    if (outcome.empty()) outcome.push_back("nothing to write");
    std::string summary = std::string(result.failures.empty() ? "restored " : "restore incomplete: ") +
                          std::to_string(result.files) + " files, " + human_bytes(result.bytes) + " from snapshot " +
                          snap.id.short_hex() + " to " + target + " in " + human_duration(seconds) + " (" +
                          human_rate(seconds > 0 ? static_cast<double>(result.bytes) / seconds : 0) + "): ";
    for (size_t i = 0; i < outcome.size(); ++i) summary += (i ? ", " : "") + outcome[i];
    if (result.partial_files_removed > 0) {
      summary += "; removed " + std::to_string(result.partial_files_removed) +
                 " partial files an interrupted restore left";
    }
    app.say(summary);
  }
  if (!result.failures.empty()) {
    // Damage in the repository first: trying again will not mend it.
    const bool damaged = result.damaged();
    app.warn("keel: " + std::to_string(result.failures.size()) + " items failed to restore" +
             (damaged ? " (the repository's data for some is damaged or missing)" : ""));
    return static_cast<int>(damaged ? ErrorKind::kIntegrity : ErrorKind::kPartial);
  }
  return 0;
}

}  // namespace keel::cli
