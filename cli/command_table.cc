#include "cli/commands.h"

namespace keel::cli {

const std::vector<CommandSpec>& command_table() {
  static const std::vector<CommandSpec> table = {
      {"init", "create an encrypted repository", cmd_init},
      {"backup", "store a snapshot of files, directories or stdin", cmd_backup},
      {"snapshots", "list snapshots", cmd_snapshots},
      {"ls", "list files in a snapshot", cmd_ls},
      {"find", "find files by name or path in all snapshots", cmd_find},
      {"diff", "what changed between two snapshots", cmd_diff},
      {"restore", "restore a snapshot, a subtree or one file", cmd_restore},
      {"dump", "write a file of a snapshot to stdout, or a directory as a tar archive", cmd_dump},
      {"tag", "add, remove or set the tags of snapshots", cmd_tag},
      {"stats", "restore size, deduplicated size and compression, per snapshot and in all", cmd_stats},
      {"check", "verify the repository (--read-data: every byte)", cmd_check},
      {"repair", "move damaged objects aside, rebuild the catalog, list what is lost", cmd_repair},
      {"forget", "remove snapshots a retention policy does not keep", cmd_forget},
      {"copy", "copy snapshots to another repository, sending only what it lacks", cmd_copy},
      {"prune", "reclaim the space of data no snapshot uses", cmd_prune},
      {"drill", "restore drill: restore or verify a snapshot against RTO/RPO objectives", cmd_drill},
      {"drills", "the history of restore drills", cmd_drills},
      {"job", "add, list, show, run or remove scheduled backup jobs", cmd_job,
       {"add", "list", "show", "run", "remove"}},
      {"scheduler", "run jobs on their schedules (a foreground daemon)", cmd_scheduler},
      {"key", "list, add or remove passwords", cmd_key},
      {"catalog", "rebuild the local catalog from the repository", cmd_catalog},
      {"migrate", "convert a format-1 repository to format 2 (put-only keys)", cmd_migrate},
      {"unlock", "remove stale locks and leases left by crashed runs", cmd_unlock},
      {"mount", "the snapshots as a read-only file tree (FUSE)", cmd_mount},
      {"gateway", "serve an S3-compatible endpoint (docs/gateway.md); gateway gc reclaims space", cmd_gateway,
       {"", "gc"}},
  };
  return table;
}

const CommandSpec* find_command(const std::string& name) {
  for (const CommandSpec& spec : command_table()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

}  // namespace keel::cli
