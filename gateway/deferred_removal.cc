#include "gateway/deferred_removal.h"

namespace keel::gateway {

DeferredRemoval::DeferredRemoval() : thread_([this] { run(); }) {}

DeferredRemoval::~DeferredRemoval() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  thread_.join();
}

void DeferredRemoval::add(const std::shared_ptr<BucketStorage>& storage, const std::vector<Segment>& segments) {
  if (segments.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (const auto& segment : segments) queue_.emplace_back(storage, segment.file);
  }
  queued_.notify_one();
}

void DeferredRemoval::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    queued_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto [storage, file] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    storage->remove(file);  // noexcept
    lock.lock();
  }
}

}  // namespace keel::gateway
