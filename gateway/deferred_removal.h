// Removes the files of deleted and replaced objects on a background thread,
// so that a delete answers once its metadata is committed instead of after
// unlinking each file: on the build VM an unlink took 1-2 ms, and the 1000 of
// a DeleteObjects were two thirds of its time. Nothing depends on the files
// going at once: no committed record names them, and the names are never
// reused. Files a crash leaves behind are removed at the next start-up
// (BucketStorage::remove_orphans) or by keel gateway gc.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "gateway/bucket_storage.h"

namespace keel::gateway {

class DeferredRemoval {
 public:
  DeferredRemoval();
  // Removes what is still queued, then stops.
  ~DeferredRemoval();
  DeferredRemoval(const DeferredRemoval&) = delete;
  DeferredRemoval& operator=(const DeferredRemoval&) = delete;

  // Queues the segments of `storage` for removal.
  void add(const std::shared_ptr<BucketStorage>& storage, const std::vector<Segment>& segments);

 private:
  void run();

  std::mutex mutex_;  // guards queue_ and stopping_
  std::condition_variable queued_;
  std::deque<std::pair<std::shared_ptr<BucketStorage>, std::string>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace keel::gateway
