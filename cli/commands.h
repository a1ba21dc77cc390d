// The keel subcommands. Each parses its own arguments (plus the global
// options) and returns the process exit code; failures throw keel::Error.
#pragma once

#include <string>
#include <vector>

#include "cli/app.h"

namespace keel::cli {

using Args = std::vector<std::string>;

int cmd_init(App& app, const Args& args);
int cmd_backup(App& app, const Args& args);
int cmd_snapshots(App& app, const Args& args);
int cmd_ls(App& app, const Args& args);
int cmd_find(App& app, const Args& args);
int cmd_restore(App& app, const Args& args);
int cmd_drill(App& app, const Args& args);
int cmd_drills(App& app, const Args& args);
int cmd_check(App& app, const Args& args);
int cmd_repair(App& app, const Args& args);
int cmd_forget(App& app, const Args& args);
int cmd_prune(App& app, const Args& args);
int cmd_key(App& app, const Args& args);
int cmd_catalog(App& app, const Args& args);
int cmd_job(App& app, const Args& args);
int cmd_scheduler(App& app, const Args& args);
int cmd_gateway(App& app, const Args& args);
int cmd_mount(App& app, const Args& args);
int cmd_unlock(App& app, const Args& args);
int cmd_diff(App& app, const Args& args);
int cmd_stats(App& app, const Args& args);
int cmd_dump(App& app, const Args& args);
int cmd_tag(App& app, const Args& args);
int cmd_copy(App& app, const Args& args);
int cmd_migrate(App& app, const Args& args);

// One entry per command: what main() dispatches to, what `keel help` lists,
// and what the man pages and shell completions are generated from.
struct CommandSpec {
  const char* name;
  const char* summary;  // one line for `keel help` and the man page's NAME
  int (*run)(App&, const Args&);
  // Commands made of actions that each parse their own options (`keel job
  // add`): the action words, "" for the command without one. Empty: the
  // command parses its options itself, once.
  std::vector<std::string> actions = {};
};

// Every command, in the order `keel help` lists them.
const std::vector<CommandSpec>& command_table();
const CommandSpec* find_command(const std::string& name);

}  // namespace keel::cli
