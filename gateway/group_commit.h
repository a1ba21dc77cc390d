// Group commit of the gateway's metadata changes. With synchronous=FULL every
// SQLite commit waits for an fsync of the WAL; committing each PUT or delete on
// its own makes concurrent requests queue for the disk one by one. Here the
// changes of concurrent requests share one transaction, and so one fsync: the
// request thread that finds no commit in progress (the leader) runs every
// change queued so far, each in its own savepoint, with the caller's mutex
// held, and commits them together; the requests that arrive while it waits
// for the disk form the next group. run() returns only once its change is
// committed, so an acknowledged write still survives a crash.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "gateway/metadata.h"

namespace keel::gateway {

class GroupCommit {
 public:
  // `mutex` guards `metadata` (S3Api's mutex); both outlive this.
  GroupCommit(std::mutex& mutex, MetadataStore& metadata) : mutex_(mutex), metadata_(metadata) {}

  // Runs `change` with the mutex held, inside a transaction shared with other
  // requests' changes, and returns once that transaction is committed. Throws
  // what `change` threw (what it changed rolled back, the others' kept), or
  // the transaction's error when the group could not commit (nothing of it
  // kept). Call without the mutex held.
  void run(const std::function<void()>& change);

  // Transactions committed or failed so far.
  uint64_t transactions() const;

 private:
  struct Pending {
    const std::function<void()>* change;
    std::exception_ptr error;
    bool done = false;
  };
  // Runs the group's changes and commits them; records errors in each Pending.
  void commit(const std::vector<Pending*>& group) noexcept;

  std::mutex& mutex_;
  MetadataStore& metadata_;
  mutable std::mutex queue_mutex_;  // guards the members below; never held while taking mutex_
  std::condition_variable finished_;
  std::vector<Pending*> queue_;
  bool leading_ = false;
  uint64_t transactions_ = 0;
};

}  // namespace keel::gateway
