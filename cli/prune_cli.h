// What `keel prune` and `keel forget --prune` share: the prune options and
// the report of a prune, as text or JSON.
#pragma once

#include <string>

#include "cli/app.h"
#include "cli/json.h"
#include "cli/progress.h"
#include "engine/prune.h"

namespace keel::cli {

struct PruneFlags {
  std::string grace = "24h";
  std::string repack_threshold = "50%";
  std::string max_repack;  // empty: no limit
};

void add_prune_options(po::options_description& opts, PruneFlags& flags);
// Throws Error(kUsage) for a value that does not parse.
engine::PruneOptions prune_options(const PruneFlags& flags, bool dry_run);

// The summary (and, for a dry run, every pack's fate) on stdout; warnings on stderr.
void print_prune(const App& app, const engine::PruneResult& result);
// The result as one JSON object.
void prune_json(Json& j, const engine::PruneResult& result);

// A running prune's progress line and status lines: its phase, snapshots
// marked, bytes repacked and condemned packs settled.
ProgressStatus prune_status(const engine::PruneProgress& progress);

}  // namespace keel::cli
