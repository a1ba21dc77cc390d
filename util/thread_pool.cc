#include "util/thread_pool.h"

namespace keel {

ThreadPool::ThreadPool(size_t threads, size_t max_queued) : max_queued_(max_queued == 0 ? 1 : max_queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  not_empty_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::submit(std::function<void()> task) {
  std::unique_lock lock(mu_);
  not_full_.wait(lock, [this] { return queue_.size() < max_queued_; });
  queue_.push_back(std::move(task));
  lock.unlock();
  not_empty_.notify_one();
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      not_empty_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    not_full_.notify_one();
    task();
  }
}

void TaskGroup::started() {
  std::lock_guard lock(mu_);
  ++running_;
}

void TaskGroup::finished(std::exception_ptr error) {
  std::lock_guard lock(mu_);
  if (error && !error_) error_ = error;
  if (--running_ == 0) done_.notify_all();
}

void TaskGroup::wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return running_ == 0; });
  if (error_) std::rethrow_exception(error_);
}

bool TaskGroup::failed() {
  std::lock_guard lock(mu_);
  return error_ != nullptr;
}

std::function<void()> TaskGroup::wrap(std::function<void()> fn) {
  return [this, fn = std::move(fn)] {
    try {
      fn();
      finished();
    } catch (...) {
      finished(std::current_exception());
    }
  };
}

void ByteBudget::acquire(size_t n) {
  std::unique_lock lock(mu_);
  freed_.wait(lock, [&] { return used_ == 0 || used_ + n <= limit_; });
  used_ += n;
  if (used_ > peak_) peak_ = used_;
}

void ByteBudget::release(size_t n) {
  {
    std::lock_guard lock(mu_);
    used_ -= n;
  }
  freed_.notify_all();
}

size_t ByteBudget::in_use() {
  std::lock_guard lock(mu_);
  return used_;
}

size_t ByteBudget::peak() {
  std::lock_guard lock(mu_);
  return peak_;
}

}  // namespace keel
