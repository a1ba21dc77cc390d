// The chunks a mount has read, kept in memory up to a byte bound (least
// recently used go first), and the fetches in flight: a chunk asked for
// twice while it is being fetched is fetched once. Fetches run on a pool,
// so the chunks of one read, and those read ahead, arrive in parallel.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/mount/lru_cache.h"
#include "util/bytes.h"
#include "util/id.h"
#include "util/thread_pool.h"

namespace keel::engine::mount {

using Chunk = std::shared_ptr<const Bytes>;
// Reads one chunk's plaintext; throws keel::Error.
using ChunkFetch = std::function<Bytes(const Id&)>;

struct ChunkCacheStats {
  uint64_t hits = 0;      // served from memory or joined a fetch in flight
  uint64_t fetches = 0;   // chunks read from the repository
  uint64_t fetched_bytes = 0;
  uint64_t cached_bytes = 0;
};

class ChunkCache {
 public:
  // `fetchers` threads fetch; at most `max_prefetch` read-ahead fetches are
  // in flight at once (more are dropped: the reader will ask again).
  ChunkCache(ChunkFetch fetch, uint64_t capacity_bytes, size_t fetchers, size_t max_prefetch);
  ~ChunkCache();
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // The chunk, from memory or once fetched; the future rethrows a failed fetch.
  std::shared_future<Chunk> get(const Id& id);
  // Starts fetching the chunk unless it is cached or on its way; never blocks.
  void prefetch(const Id& id);

  ChunkCacheStats stats();
  uint64_t capacity() const { return capacity_; }

 private:
  std::shared_future<Chunk> start_fetch(const Id& id, bool is_prefetch);

  ChunkFetch fetch_;
  uint64_t capacity_;
  size_t max_prefetch_;
  std::atomic<size_t> prefetches_{0};
  std::mutex mu_;
  LruCache<Id, Bytes, IdHash> chunks_;
  std::unordered_map<Id, std::shared_future<Chunk>, IdHash> in_flight_;
  ChunkCacheStats stats_;
  ThreadPool pool_;  // last: its threads are joined before the rest is destroyed
};

}  // namespace keel::engine::mount
