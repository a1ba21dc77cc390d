// How a command's CPU time by stage appears in its JSON document (docs/json.md,
// "CPU by stage"): shared by `keel backup` and `keel restore`.
#pragma once

#include <array>
#include <span>

#include "cli/json.h"
#include "engine/stage_cpu.h"

namespace keel::cli {

// Writes "cpu_seconds": {stage: s, ..., "other": s, "total": s} for `stages`
// (other: `total` minus the stages) and "cpu_seconds_per_gb", the same per
// `gb` (10^9 bytes), null when `gb` is 0, into an open object.
void stage_cpu_json_fields(Json& j, std::span<const engine::Stage> stages,
                           const std::array<double, engine::kStageCount>& seconds, double total, double gb);

}  // namespace keel::cli
