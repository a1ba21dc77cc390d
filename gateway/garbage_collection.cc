#include "gateway/garbage_collection.h"

#include <map>

#include "gateway/dedupe_storage.h"
#include "gateway/metadata.h"
#include "util/error.h"

namespace keel::gateway {

std::string state_lock_path(const GatewayConfig& config) { return config.state_dir + "/gateway.lock"; }

FileLock lock_state(const GatewayConfig& config) {
  auto lock = FileLock::try_lock(state_lock_path(config));
  if (!lock) {
    throw Error(ErrorKind::kLocked, "the gateway state directory " + config.state_dir +
                                        " is in use by a running keel gateway or keel gateway gc; stop the gateway "
                                        "before collecting garbage");
  }
  return std::move(*lock);
}

std::vector<RepositoryCollection> collect_garbage(const GatewayConfig& config, const engine::PruneOptions& options) {
  const FileLock lock = lock_state(config);
  MetadataStore metadata(config.state_dir + "/gateway.db");
  std::map<std::string, const BucketConfig*> first_bucket;  // a bucket naming each repository's access
  std::vector<RepositoryCollection> results;
  for (const BucketConfig& bucket : config.buckets) {
    if (bucket.mode != BucketMode::kDedupe) continue;
    if (first_bucket.emplace(bucket.repository.location, &bucket).second) {
      results.push_back({bucket.repository.location, {}, 0, {}});
    }
    for (auto& r : results) {
      if (r.location == bucket.repository.location) r.buckets.push_back(bucket.name);
    }
  }
  for (RepositoryCollection& result : results) {
    const auto repo = open_bucket_repository(*first_bucket.at(result.location));
    engine::PruneOptions prune_options = options;
    // Every bucket recorded on this repository counts, also one dropped from
    // the configuration: its versions still need their chunks.
    prune_options.extra_roots = [&](const std::function<void(const Id&)>& mark) {
      result.referenced_chunks = 0;
      for (const BucketRecord& bucket : metadata.buckets()) {
        if (bucket.mode != bucket_mode_name(BucketMode::kDedupe) || bucket.path != result.location) continue;
        for (const std::string& segment : metadata.referenced_files(bucket.name)) {
          for (const ChunkPiece& chunk : decode_chunk_list(segment)) {
            mark(chunk.id);
            ++result.referenced_chunks;
          }
        }
      }
    };
    result.prune = engine::prune(*repo, prune_options);
  }
  return results;
}

}  // namespace keel::gateway
