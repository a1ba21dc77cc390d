#include "cli/copy_report.h"

#include "cli/format.h"

namespace keel::cli {

ProgressStatus copy_status(const engine::CopyProgress& progress) {
  ProgressStatus s;
  s.counts.push_back({"snapshots", progress.snapshots_done.load(), std::nullopt});
  s.bytes = progress.bytes_read.load();
  s.bytes_label = "read";
  s.sizes.push_back({"bytes_sent", "sent", progress.bytes_sent.load()});
  return s;
}

size_t snapshots_copied(const engine::CopyResult& result) {
  size_t copied = 0;
  for (const engine::CopiedSnapshot& s : result.snapshots) copied += !s.existed;
  return copied;
}

void copy_json_fields(Json& j, const engine::CopyResult& result, bool dry_run) {
  j.field("dry_run", dry_run).key("snapshots").begin_array();
  for (const engine::CopiedSnapshot& s : result.snapshots) {
    j.begin_object()
        .field("source", s.source.id.hex())
        .field("copy", s.copy.hex())
        .field("already_copied", s.existed)
        .field("time", iso_time(s.source.time_ns))
        .field("host", s.source.host)
        .field("paths", s.source.paths)
        .end_object();
  }
  j.end_array()
      .field("snapshots_copied", static_cast<uint64_t>(dry_run ? 0 : snapshots_copied(result)))
      .field("chunks_read", result.chunks_read)
      .field("bytes_read", result.bytes_read)
      .field("chunks_sent", result.chunks_sent)
      .field("trees_sent", result.trees_sent)
      .field("bytes_sent", result.bytes_sent)
      .field("chunks_reused", result.chunks_reused)
      .field("packs_written", result.packs_written);
}

std::string copy_summary(const engine::CopyResult& result, const std::string& source) {
  const size_t copied = snapshots_copied(result);
  return std::to_string(copied) + " snapshots copied, " + std::to_string(result.snapshots.size() - copied) +
         " copied before; read " + std::to_string(result.chunks_read) + " chunks (" + human_bytes(result.bytes_read) +
         ") from " + source + ", sent " + std::to_string(result.chunks_sent) + " chunks and " +
         std::to_string(result.trees_sent) + " trees (" + human_bytes(result.bytes_sent) + ", " +
         std::to_string(result.packs_written) + " packs), " + std::to_string(result.chunks_reused) +
         " chunks already there";
}

}  // namespace keel::cli
