#include "cli/stage_cpu_report.h"

#include <algorithm>

namespace keel::cli {

void stage_cpu_json_fields(Json& j, std::span<const engine::Stage> stages,
                           const std::array<double, engine::kStageCount>& seconds, double total, double gb) {
  double staged = 0;
  for (engine::Stage s : stages) staged += seconds[static_cast<size_t>(s)];
  auto stage_fields = [&](double scale) {
    j.begin_object();
    for (engine::Stage s : stages) j.field(engine::stage_name(s), seconds[static_cast<size_t>(s)] * scale);
    j.field("other", std::max(0.0, total - staged) * scale).field("total", total * scale);
    j.end_object();
  };
  j.key("cpu_seconds");
  stage_fields(1);
  j.key("cpu_seconds_per_gb");
  if (gb > 0) {
    stage_fields(1 / gb);
  } else {
    j.null();
  }
}

}  // namespace keel::cli
