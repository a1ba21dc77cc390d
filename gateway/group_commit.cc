#include "gateway/group_commit.h"

namespace keel::gateway {

void GroupCommit::run(const std::function<void()>& change) {
  Pending pending{&change};
  std::unique_lock lock(queue_mutex_);
  queue_.push_back(&pending);
  while (!pending.done) {
    if (leading_) {
      finished_.wait(lock);
      continue;
    }
    // Lead: everything queued so far, this request's change included.
    leading_ = true;
    std::vector<Pending*> group;
    group.swap(queue_);
    lock.unlock();
    commit(group);
    lock.lock();
    for (Pending* p : group) p->done = true;
    leading_ = false;
    ++transactions_;
    finished_.notify_all();
  }
  if (pending.error) std::rethrow_exception(pending.error);
}

uint64_t GroupCommit::transactions() const {
  std::lock_guard lock(queue_mutex_);
  return transactions_;
}

void GroupCommit::commit(const std::vector<Pending*>& group) noexcept {
  try {
    std::lock_guard lock(mutex_);
    metadata_.transaction([&] {
      for (Pending* p : group) {
        try {
          metadata_.savepoint(*p->change);
        } catch (...) {
          // SQLite ended the whole transaction on this error: the group fails with it.
          if (!metadata_.in_transaction()) throw;
          p->error = std::current_exception();
        }
      }
    });
  } catch (...) {
    for (Pending* p : group) {
      if (!p->error) p->error = std::current_exception();
    }
  }
}

}  // namespace keel::gateway
