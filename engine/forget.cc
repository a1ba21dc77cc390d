// TEMPORARY placeholder, so keel_jobs links before the retention branch is
// merged. The lead drops this commit ("TEMP forget placeholder") at merge.
#include "engine/forget.h"

#include "util/error.h"

namespace keel::engine {

bool RetentionPolicy::empty() const {
  return last == 0 && hourly == 0 && daily == 0 && weekly == 0 && monthly == 0 && yearly == 0 && keep_tags.empty();
}

std::vector<ForgetDecision> plan_forget(std::vector<catalog::SnapshotRecord>, const SnapshotSelection&,
                                        const RetentionPolicy&, GroupBy) {
  throw Error(ErrorKind::kUsage, "forget not available");
}

std::vector<ForgetDecision> forget(Repository&, const SnapshotSelection&, const RetentionPolicy&, GroupBy, bool) {
  throw Error(ErrorKind::kUsage, "forget not available");
}

}  // namespace keel::engine
