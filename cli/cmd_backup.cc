#include <unistd.h>

#include <iostream>
#include <optional>

#include "agents/fs/fs_source.h"
#include "agents/stdin/stdin_source.h"
#include "cli/backup_report.h"
#include "cli/commands.h"
#include "cli/number_option.h"
#include "engine/backup.h"
#include "engine/compress.h"
#include "jobs/command_output.h"
#include "util/error.h"

namespace keel::cli {

int cmd_backup(App& app, const Args& args) {
  std::vector<std::string> paths, excludes, tags;
  std::string stdin_name, host, parent, compression;
  bool use_stdin = false, from_command = false, force = false, one_fs = false;
  size_t memory_mib = 256;
  po::options_description opts(
      "keel backup [options] PATH...: store a snapshot of PATHs, of standard input (--stdin), or of what a "
      "command prints (--stdin-from-command -- COMMAND [ARG...])");
  opts.add_options()
      ("path", po::value(&paths)->composing(), "files and directories to back up")
      ("exclude,e", po::value(&excludes)->composing(), "skip items matching this glob (repeatable)")
      ("tag", po::value(&tags)->composing(), "tag the snapshot (repeatable)")
      ("host", po::value(&host), "host name recorded in the snapshot")
      ("parent", po::value(&parent), "compare against this snapshot instead of the latest of the same paths")
      ("force", po::bool_switch(&force), "read every file, even those unchanged since the parent")
      ("one-file-system,x", po::bool_switch(&one_fs), "stay on the file system of each PATH")
      ("stdin", po::bool_switch(&use_stdin), "back up standard input as one file")
      ("stdin-from-command", po::bool_switch(&from_command),
       "run COMMAND and back up its standard output; no snapshot unless it exits 0")
      ("stdin-name", po::value(&stdin_name)->default_value("stdin"), "file name for --stdin and --stdin-from-command")
      ("memory", count_option(&memory_mib, "--memory", 1, kMaxMemoryMib, "MiB")->default_value(std::to_string(memory_mib)), "MiB of data in flight at most")
      ("compression", po::value(&compression),
       "for this backup instead of the repository's: off, fast, default, max, or a zstd level (-7..19)");
  po::positional_options_description pos;
  pos.add("path", -1);
  po::variables_map vm;
  if (!app.parse(args, opts, pos, vm)) return 0;
  // The global --append-only: delete and overwrite nothing on the target (docs/immutable.md).
  const bool append_only = app.global.append_only;
  if (from_command) {
    if (use_stdin) throw Error(ErrorKind::kUsage, "--stdin and --stdin-from-command exclude each other");
    if (paths.empty()) throw Error(ErrorKind::kUsage, "--stdin-from-command needs a command: -- COMMAND [ARG...]");
  } else if (use_stdin == !paths.empty()) {
    throw Error(ErrorKind::kUsage, "give PATHs to back up, or --stdin (not both)");
  }

  // Outlive the source, whose reader reads the pipe; a command still running when the backup
  // fails is killed.
  std::optional<jobs::CommandOutput> command;
  std::unique_ptr<engine::Source> source;
  if (from_command) {
    command.emplace(paths);
    source = agents::stdin_stream::make_stream_source(command->read_fd(), stdin_name, [&] { command->check_exit(); });
  } else if (use_stdin) {
    source = agents::stdin_stream::make_stream_source(STDIN_FILENO, stdin_name);
  } else {
    source = agents::fs::make_fs_source(paths, agents::fs::FsOptions{.excludes = excludes, .one_file_system = one_fs});
  }
  const std::optional<int> level =
      compression.empty() ? std::nullopt : std::optional<int>(engine::parse_compression(compression, "--compression"));
  auto repo = append_only ? app.open_repository_append_only() : app.open_repository();

  engine::BackupOptions options;
  options.tags = tags;
  options.host = host;
  if (!parent.empty()) options.parent = repo->find_snapshot(parent).id;
  options.reread_unchanged = force;
  options.memory_budget = memory_mib << 20;
  options.cancel = &App::cancel;
  options.compression_level = level;
  options.append_only = append_only;
  engine::BackupProgress progress;
  engine::BackupResult result;
  {
    Progress shown(app, "backup", [&] { return backup_status(progress); });
    result = engine::run_backup(*repo, *source, options, progress, [&](const engine::SkippedItem& item) {
      app.warn("keel: skipped " + item.path + ": " + item.reason);
    });
  }
  if (app.global.json) {
    Json j;
    j.begin_object();
    backup_json_fields(j, result);
    j.field("transfer", repo->target().transfer_stats());
    j.end_object();
    std::cout << j.str() << "\n";
  } else {
    app.say(backup_summary(result.snapshot));
  }
  if (!result.catalog_copy_error.empty()) {
    app.warn("keel: warning: the snapshot is saved, but the catalog copy on the target failed: " +
             result.catalog_copy_error);
  }
  if (!result.skipped.empty()) {
    app.warn("keel: " + std::to_string(result.skipped.size()) + " items could not be backed up (listed above)");
    return static_cast<int>(ErrorKind::kPartial);
  }
  return 0;
}

}  // namespace keel::cli
