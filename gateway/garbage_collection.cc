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
  // Each repository once, with the configuration section that opens it.
  std::map<std::string, std::pair<engine::RepositoryAccess, std::string>> repositories;
  if (config.api_bucket_repository) {
    repositories.emplace(config.api_bucket_repository->location, std::pair{*config.api_bucket_repository, "[dedupe]"});
  }
  for (const BucketConfig& bucket : config.buckets) {
    if (bucket.mode != BucketMode::kDedupe) continue;
    repositories.emplace(bucket.repository.location, std::pair{bucket.repository, "bucket '" + bucket.name + "'"});
  }
  // Every bucket recorded on a repository counts, also one dropped from the
  // configuration: its versions still need their chunks.
  const auto buckets_on = [&](const std::string& location) {
    std::vector<std::string> names;
    for (const BucketRecord& bucket : metadata.buckets()) {
      if (bucket.mode == bucket_mode_name(BucketMode::kDedupe) && bucket.path == location) names.push_back(bucket.name);
    }
    return names;
  };
  std::vector<RepositoryCollection> results;
  for (const auto& [location, access] : repositories) {
    RepositoryCollection& result = results.emplace_back();
    result.location = location;
    result.buckets = buckets_on(location);
    const auto repo = open_bucket_repository(access.first, access.second);
    engine::PruneOptions prune_options = options;
    prune_options.extra_roots = [&](const std::function<void(const Id&)>& mark) {
      result.referenced_chunks = 0;
      for (const std::string& bucket : buckets_on(location)) {
        for (const std::string& segment : metadata.referenced_files(bucket)) {
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
