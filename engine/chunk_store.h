// Data chunks of one repository shared by many concurrent writers (the
// gateway's dedupe buckets), made durable in groups.
//
// Writers add chunks through a Session: each chunk is named (keyed HMAC),
// deduplicated against the repository's index and the chunks other sessions
// have in flight, then sealed into the current batch's packs. sync() returns
// once every chunk the session added or relied on is in a pack committed to
// the target and indexed. Group commit: sync() finishes the current batch
// (everyone's chunks since the last flush share its packs); one that comes
// while a flush runs waits for it and then flushes what piled up meanwhile.
// A failed batch fails every session that needs it, and its chunks are
// forgotten, so a later writer stores them again. Reads go through the
// catalog, on a pool so that readers can fetch ahead. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <unordered_map>
#include <vector>

#include "engine/blob_index.h"
#include "engine/repository.h"
#include "util/thread_pool.h"

namespace keel::engine {

class ChunkStore {
 public:
  explicit ChunkStore(std::unique_ptr<Repository> repo);
  ~ChunkStore();
  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  struct Batch;

  class Session {
   public:
    explicit Session(ChunkStore& store) : store_(&store) {}
    // Stores `chunk` unless the repository has it (or it is in flight);
    // returns its id. Throws if sealing or packing fails.
    Id add(ByteView chunk);
    // Waits until every chunk added so far is durable and indexed; throws
    // the failure of a batch it needed.
    void sync();

   private:
    void need(const std::shared_ptr<Batch>& batch);
    ChunkStore* store_;
    std::vector<std::shared_ptr<Batch>> needs_;
  };
  Session session() { return Session(*this); }

  // The chunk's bytes, read and checked on the read pool.
  std::future<Bytes> read(const Id& chunk);

  // Bytes passed to Session::add, and sealed bytes of the chunks stored
  // because the repository did not have them, since this store was opened.
  uint64_t logical_bytes() const { return logical_bytes_; }
  uint64_t stored_bytes() const { return stored_bytes_; }

  Repository& repository() { return *repo_; }

 private:
  // Flushes batches until `batch` is done; called with mu_ held.
  void wait_durable(const std::shared_ptr<Batch>& batch, std::unique_lock<std::mutex>& lock);
  std::shared_ptr<Batch> new_batch();

  std::unique_ptr<Repository> repo_;
  BlobIndex index_;  // chunks in committed packs outside condemned ones
  ByteBudget part_budget_;
  ThreadPool uploads_;
  ThreadPool readers_;
  std::mutex mu_;
  std::condition_variable changed_;
  // Declared after the pools, so destroyed first: a batch's pack writer
  // uses the upload pool.
  std::shared_ptr<Batch> current_;
  std::unordered_map<Id, std::shared_ptr<Batch>, IdHash> in_flight_;
  bool flushing_ = false;
  std::atomic<uint64_t> logical_bytes_{0};
  std::atomic<uint64_t> stored_bytes_{0};
};

}  // namespace keel::engine
