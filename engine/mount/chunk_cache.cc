#include "engine/mount/chunk_cache.h"

namespace keel::engine::mount {

namespace {
// Deep enough that a reader's submit never waits behind read-ahead.
constexpr size_t kQueuedPerFetcher = 64;
}  // namespace

ChunkCache::ChunkCache(ChunkFetch fetch, uint64_t capacity_bytes, size_t fetchers, size_t max_prefetch)
    : fetch_(std::move(fetch)),
      capacity_(capacity_bytes),
      max_prefetch_(max_prefetch),
      chunks_(capacity_bytes),
      pool_(std::max<size_t>(1, fetchers), std::max<size_t>(1, fetchers) * kQueuedPerFetcher) {}

ChunkCache::~ChunkCache() = default;

std::shared_future<Chunk> ChunkCache::get(const Id& id) {
  {
    std::lock_guard lock(mu_);
    if (Chunk chunk = chunks_.get(id)) {
      ++stats_.hits;
      std::promise<Chunk> ready;
      ready.set_value(std::move(chunk));
      return ready.get_future().share();
    }
  }
  return start_fetch(id, false);
}

void ChunkCache::prefetch(const Id& id) {
  if (prefetches_.load() >= max_prefetch_) return;
  {
    std::lock_guard lock(mu_);
    if (chunks_.get(id) || in_flight_.count(id)) return;
  }
  start_fetch(id, true);
}

std::shared_future<Chunk> ChunkCache::start_fetch(const Id& id, bool is_prefetch) {
  auto promise = std::make_shared<std::promise<Chunk>>();
  std::shared_future<Chunk> future;
  {
    std::lock_guard lock(mu_);
    // Another caller may have cached or started it since the caller looked.
    if (Chunk chunk = chunks_.get(id)) {
      ++stats_.hits;
      promise->set_value(std::move(chunk));
      return promise->get_future().share();
    }
    if (auto it = in_flight_.find(id); it != in_flight_.end()) {
      ++stats_.hits;
      return it->second;
    }
    future = promise->get_future().share();
    in_flight_.emplace(id, future);
  }
  if (is_prefetch) ++prefetches_;
  pool_.submit([this, id, promise, is_prefetch] {
    Chunk chunk;
    std::exception_ptr error;
    try {
      chunk = std::make_shared<const Bytes>(fetch_(id));
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      if (chunk) {
        chunks_.put(id, chunk, chunk->size());
        ++stats_.fetches;
        stats_.fetched_bytes += chunk->size();
      }
      in_flight_.erase(id);  // a failed fetch is tried again by the next reader
    }
    if (is_prefetch) --prefetches_;
    if (error) {
      promise->set_exception(error);
    } else {
      promise->set_value(std::move(chunk));
    }
  });
  return future;
}

ChunkCacheStats ChunkCache::stats() {
  std::lock_guard lock(mu_);
  ChunkCacheStats out = stats_;
  out.cached_bytes = chunks_.weight();
  return out;
}

}  // namespace keel::engine::mount
