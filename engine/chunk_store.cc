#include "engine/chunk_store.h"

#include <algorithm>

#include "engine/chunk_sealer.h"
#include "engine/content.h"
#include "util/error.h"

namespace keel::engine {
namespace {

constexpr size_t kUploadThreads = 4;
constexpr size_t kReadThreads = 8;
constexpr size_t kPartsInFlight = 8;

}  // namespace

struct ChunkStore::Batch {
  Batch(Repository& repo, ThreadPool& uploads, ByteBudget& budget)
      : packs(repo.content(), PackWriterOptions{repo.config().pack_size, repo.config().part_size}, uploads, budget) {}

  ContentWriter packs;
  std::vector<Id> ids;  // claimed by this batch
  // Guarded by ChunkStore::mu_:
  size_t adding = 0;    // chunks being sealed into `packs`
  bool open = true;     // still taking chunks (it is the current batch)
  bool done = false;    // flushed, or failed with `error`
  std::exception_ptr error;
};

ChunkStore::ChunkStore(std::unique_ptr<Repository> repo)
    : repo_(std::move(repo)),
      index_(repo_->catalog(), repo_->keys()),
      part_budget_(kPartsInFlight * std::max(repo_->config().part_size, repo_->target().min_part_size())),
      uploads_(kUploadThreads, 2 * kPartsInFlight),
      readers_(kReadThreads, 1024),
      current_(new_batch()) {}

ChunkStore::~ChunkStore() = default;

std::shared_ptr<ChunkStore::Batch> ChunkStore::new_batch() {
  return std::make_shared<Batch>(*repo_, uploads_, part_budget_);
}

Id ChunkStore::Session::add(ByteView chunk) {
  ChunkStore& s = *store_;
  const Id id = chunk_id(*s.repo_, chunk);
  s.logical_bytes_ += chunk.size();
  std::shared_ptr<Batch> batch;
  {
    std::lock_guard lock(s.mu_);
    if (s.index_.contains(id)) return id;
    if (const auto it = s.in_flight_.find(id); it != s.in_flight_.end()) {
      need(it->second);
      return id;
    }
    batch = s.current_;
    s.in_flight_.emplace(id, batch);
    batch->ids.push_back(id);
    ++batch->adding;
    need(batch);
  }
  std::exception_ptr error;
  try {
    thread_local Bytes sealed;
    seal_chunk(*s.repo_, id, chunk, s.repo_->config().compression_level, sealed);
    batch->packs.add(catalog::BlobType::kData, id, static_cast<uint32_t>(chunk.size()), sealed);
    s.stored_bytes_ += sealed.size();
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard lock(s.mu_);
    // A chunk missing from the batch's packs fails everyone who relies on it.
    if (error && !batch->error) batch->error = error;
    --batch->adding;
  }
  s.changed_.notify_all();
  if (error) std::rethrow_exception(error);
  return id;
}

void ChunkStore::Session::need(const std::shared_ptr<Batch>& batch) {
  if (std::find(needs_.begin(), needs_.end(), batch) == needs_.end()) needs_.push_back(batch);
}

void ChunkStore::Session::sync() {
  std::unique_lock lock(store_->mu_);
  for (const auto& batch : needs_) store_->wait_durable(batch, lock);
  needs_.clear();
}

void ChunkStore::wait_durable(const std::shared_ptr<Batch>& batch, std::unique_lock<std::mutex>& lock) {
  while (!batch->done) {
    if (!batch->open || flushing_) {
      changed_.wait(lock);
      continue;
    }
    // `batch` is the current one and no flush runs: flush it for everyone.
    flushing_ = true;
    std::shared_ptr<Batch> flushing = std::move(current_);
    flushing->open = false;
    try {
      current_ = new_batch();
    } catch (...) {
      current_ = flushing;
      flushing->open = true;
      flushing_ = false;
      throw;
    }
    changed_.wait(lock, [&] { return flushing->adding == 0; });
    std::exception_ptr error = flushing->error;
    lock.unlock();
    if (!error) {
      try {
        flushing->packs.flush();
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    for (const Id& id : flushing->ids) {
      in_flight_.erase(id);
      if (!error) index_.claim(id);
    }
    flushing->error = error;
    flushing->done = true;
    flushing_ = false;
    changed_.notify_all();
  }
  if (batch->error) std::rethrow_exception(batch->error);
}

std::future<Bytes> ChunkStore::read(const Id& chunk) {
  auto promise = std::make_shared<std::promise<Bytes>>();
  std::future<Bytes> result = promise->get_future();
  readers_.submit([this, promise, chunk] {
    try {
      promise->set_value(repo_->content().read(chunk));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  return result;
}

}  // namespace keel::engine
