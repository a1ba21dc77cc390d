#include "gateway/lifecycle_sweeper.h"

#include "gateway/s3_api_util.h"
#include "util/error.h"

namespace keel::gateway {

LifecycleSweeper::LifecycleSweeper(S3Api& api, std::chrono::seconds interval, Metrics& metrics, std::ostream& log)
    : api_(api), interval_(interval), metrics_(metrics), log_(log), thread_([this] { run(); }) {}

LifecycleSweeper::~LifecycleSweeper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_one();
  thread_.join();
}

void LifecycleSweeper::run() {
  std::unique_lock lock(mutex_);
  while (!stop_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    try {
      const auto started = std::chrono::steady_clock::now();
      const auto sweep = api_.sweep_lifecycle(now_ns(), kSweepBudget);
      metrics_.record_lifecycle_sweep(
          {sweep.expired, sweep.noncurrent_removed, sweep.delete_markers_removed, sweep.uploads_aborted},
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      if (kept_in_pass_ == 0 && !sweep.kept.empty()) first_kept_ = sweep.kept.front();
      kept_in_pass_ += sweep.kept.size();
      if (sweep.finished) {
        if (kept_in_pass_ != kept_last_pass_ && kept_in_pass_ > 0) {
          log_ << "keel gateway: " << first_kept_ << " (" << kept_in_pass_
               << " versions due to expire are kept by Object Lock)" << std::endl;
        }
        kept_last_pass_ = kept_in_pass_;
        kept_in_pass_ = 0;
      }
    } catch (const Error& e) {
      // A failed run (the disk full, the database busy) is tried again at the next interval.
      log_ << "keel gateway: lifecycle sweep failed: " << e.what() << std::endl;
    }
    lock.lock();
  }
}

}  // namespace keel::gateway
