#include "cli/backup_report.h"

#include "cli/format.h"
#include "cli/stage_cpu_report.h"

namespace keel::cli {

ProgressStatus backup_status(const engine::BackupProgress& progress) {
  ProgressStatus s;
  s.counts.push_back({"files", progress.files.load(), std::nullopt});
  s.bytes = progress.bytes.load();
  if (progress.expected_bytes > 0) s.bytes_total = progress.expected_bytes;
  s.bytes_label = "scanned";
  s.sizes.push_back({"bytes_read", "read", progress.bytes_read.load()});
  s.sizes.push_back({"bytes_added", "added", progress.bytes_added.load()});
  return s;
}

std::string backup_summary(const catalog::SnapshotRecord& snap) {
  double seconds = static_cast<double>(snap.stats.duration_ms) / 1000.0;
  return "snapshot " + snap.id.short_hex() + " saved: " + std::to_string(snap.stats.files) + " files, " +
         human_bytes(snap.stats.bytes) + " (" + human_bytes(snap.stats.bytes_read) + " read, " +
         human_bytes(snap.stats.bytes_added) + " added) in " + human_duration(seconds) + ", " +
         human_rate(seconds > 0 ? static_cast<double>(snap.stats.bytes) / seconds : 0);
}

void backup_json_fields(Json& j, const engine::BackupResult& result) {
  const catalog::SnapshotRecord& snap = result.snapshot;
  j.field("snapshot", snap.id.hex())
      .field("parent", snap.parent ? snap.parent->hex() : "")
      .field("files", snap.stats.files)
      .field("dirs", snap.stats.dirs)
      .field("bytes", snap.stats.bytes)
      .field("bytes_read", snap.stats.bytes_read)
      .field("bytes_added", snap.stats.bytes_added)
      .field("chunks_added", snap.stats.chunks_added)
      .field("errors", snap.stats.errors)
      .field("seconds", static_cast<double>(snap.stats.duration_ms) / 1000.0)
      .field("peak_buffered_bytes", static_cast<uint64_t>(result.peak_buffered_bytes));
  // CPU seconds by stage, and per GB (10^9 bytes) read from the source.
  stage_cpu_json_fields(j, engine::kBackupStages, result.stage_cpu_seconds, result.cpu_seconds,
                        static_cast<double>(snap.stats.bytes_read) / 1e9);
  j.key("skipped").begin_array();
  for (const auto& s : result.skipped) j.begin_object().field("path", s.path).field("reason", s.reason).end_object();
  j.end_array();
}

}  // namespace keel::cli
