// Runs the gateway's lifecycle sweep (S3Api::sweep_lifecycle) on its own
// thread every `interval`, each run bounded to kSweepBudget versions and
// uploads, counts each run's work in the gateway's metrics, and logs the
// versions Object Lock kept from expiring: once per complete pass, and only
// when their number changed, so that a locked version does not fill the log
// every interval.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "gateway/metrics.h"
#include "gateway/s3_api.h"

namespace keel::gateway {

class LifecycleSweeper {
 public:
  // Versions and uploads one run looks at, at most: a million-object bucket
  // is swept over ten runs, each page of 500 taking the metadata lock alone.
  static constexpr uint64_t kSweepBudget = 100'000;

  // `api`, `metrics` and `log` must outlive this.
  LifecycleSweeper(S3Api& api, std::chrono::seconds interval, Metrics& metrics, std::ostream& log);
  // Stops after the run in progress.
  ~LifecycleSweeper();
  LifecycleSweeper(const LifecycleSweeper&) = delete;
  LifecycleSweeper& operator=(const LifecycleSweeper&) = delete;

 private:
  void run();

  S3Api& api_;
  const std::chrono::seconds interval_;
  Metrics& metrics_;
  std::ostream& log_;
  uint64_t kept_in_pass_ = 0, kept_last_pass_ = 0;
  std::string first_kept_;  // of this pass
  std::mutex mutex_;  // guards stopping_
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace keel::gateway
