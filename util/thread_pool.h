// A fixed pool of threads with a bounded queue: submit() blocks while the
// queue is full, which is how a slow stage pushes back on the one feeding it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace keel {

class ThreadPool {
 public:
  ThreadPool(size_t threads, size_t max_queued);
  ~ThreadPool();  // finishes queued tasks, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void submit(std::function<void()> task);
  size_t size() const { return threads_.size(); }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<std::function<void()>> queue_;
  size_t max_queued_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Tracks a set of tasks: wait() blocks until all that were started have
// finished and rethrows the first exception any of them threw.
class TaskGroup {
 public:
  void started();
  void finished(std::exception_ptr error = nullptr);
  void wait();
  // True once any task failed: lets producers stop early.
  bool failed();

  // Wraps `fn` so that it reports to this group; call started() first.
  std::function<void()> wrap(std::function<void()> fn);

 private:
  std::mutex mu_;
  std::condition_variable done_;
  size_t running_ = 0;
  std::exception_ptr error_;
};

// Counts bytes in flight against a budget: acquire() blocks until there is
// room. A request larger than the whole budget waits until nothing else is
// held, so it cannot deadlock.
class ByteBudget {
 public:
  explicit ByteBudget(size_t limit) : limit_(limit) {}
  void acquire(size_t n);
  void release(size_t n);
  size_t in_use();
  size_t peak();

 private:
  std::mutex mu_;
  std::condition_variable freed_;
  size_t limit_;
  size_t used_ = 0;
  size_t peak_ = 0;
};

}  // namespace keel
