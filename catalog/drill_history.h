// The catalog's record of restore drills: history, kept when the index is
// rebuilt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/id.h"

namespace keel::catalog {

// One restore drill (`keel drill`): history, kept when the index is rebuilt.
struct DrillRecord {
  int64_t id = 0;                  // assigned by add_drill
  int64_t started_ns = 0;          // Unix time the drill started
  Id snapshot;
  double seconds = 0;              // from start until the last byte was restored and checked
  double first_file_seconds = -1;  // until the first file was complete; -1: none was
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;             // files that failed
  std::optional<double> rto_seconds;  // the objectives, when given
  std::optional<double> rpo_seconds;
  bool rto_met = true;
  bool rpo_met = true;
  double rpo_seen_seconds = 0;     // age of the newest complete snapshot (may be infinite: none)
  bool verify_only = false;
  double sample = 1.0;             // fraction of the files drilled
  uint64_t seed = 0;               // the sample's seed
  std::string report_json;         // the whole report, as `keel drill --json` printed it
};

class DrillHistory {
 public:
  virtual ~DrillHistory() = default;
  // Returns the new record's id.
  virtual int64_t add_drill(const DrillRecord& drill) = 0;
  virtual std::vector<DrillRecord> list_drills() = 0;  // oldest first
};

}  // namespace keel::catalog
