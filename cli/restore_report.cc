#include "cli/restore_report.h"

namespace keel::cli {

ProgressStatus restore_status(const engine::RestoreProgress& progress) {
  ProgressStatus s;
  s.counts.push_back({"files", progress.files_done.load(), progress.files_total});
  s.bytes = progress.bytes_done.load();
  s.bytes_total = progress.bytes_total;
  return s;
}

}  // namespace keel::cli
