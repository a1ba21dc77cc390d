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
int cmd_forget(App& app, const Args& args);
int cmd_prune(App& app, const Args& args);
int cmd_key(App& app, const Args& args);
int cmd_catalog(App& app, const Args& args);
int cmd_job(App& app, const Args& args);
int cmd_scheduler(App& app, const Args& args);
int cmd_gateway(App& app, const Args& args);
int cmd_mount(App& app, const Args& args);
int cmd_unlock(App& app, const Args& args);

}  // namespace keel::cli
