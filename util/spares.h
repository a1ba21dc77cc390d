// Objects reused by whoever needs one for a while (the buffers of a read in
// flight): the one given back last is taken first, its memory likely still
// in cache, and no more are ever made than were held at once. Per-thread
// objects instead cost one per thread that ever ran, and fresh memory is
// dear: a first touch costs a page fault, 2.6-6 ms of CPU per MiB on the
// development VM (docs/performance.md). Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace keel {

template <class T>
class Spares {
 public:
  // One given back before, or a new T.
  std::unique_ptr<T> take() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        std::unique_ptr<T> t = std::move(free_.back());
        free_.pop_back();
        return t;
      }
    }
    return std::make_unique<T>();
  }

  void give(std::unique_ptr<T> t) {
    std::lock_guard lock(mu_);
    free_.push_back(std::move(t));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<T>> free_;
};

// One of `spares`, held for a scope.
template <class T>
class Spare {
 public:
  explicit Spare(Spares<T>& spares) : spares_(spares), held_(spares.take()) {}
  ~Spare() { spares_.give(std::move(held_)); }
  Spare(const Spare&) = delete;
  Spare& operator=(const Spare&) = delete;

  T& operator*() { return *held_; }
  T* operator->() { return held_.get(); }

 private:
  Spares<T>& spares_;
  std::unique_ptr<T> held_;
};

}  // namespace keel
