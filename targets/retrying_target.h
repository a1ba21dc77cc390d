// Retries what failed with a transient keel::Error (throttling, 5xx, a
// timeout, a broken connection: whatever the inner target marks
// Persistence::kTransient) with exponential back-off and full jitter. Every
// target operation is idempotent or made so here: a listing retried from the
// start hands each key to the caller once. Its retries are the target's
// throttle_events (readers back off when they grow) and the "retries"
// transfer statistic.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "targets/target.h"
#include "util/error.h"

namespace keel::targets {

struct RetryPolicy {
  int max_attempts = 10;
  std::chrono::milliseconds base{50};
  std::chrono::milliseconds cap{5000};
};

std::unique_ptr<Target> make_retrying_target(std::unique_ptr<Target> inner, RetryPolicy policy = {});

// The wait before attempt `attempt + 1`: random, up to base * 2^attempt, at most cap.
void back_off(const RetryPolicy& policy, int attempt);
// The error to give up with after `attempts` failed attempts ending in `last`.
[[noreturn]] void give_up(const Error& last, int attempts);

// Calls `fn` until it returns, throws anything but a transient keel::Error,
// or has failed `policy.max_attempts` times (then the last error goes on,
// saying how many attempts were made). `retries` counts the attempts after
// the first. For what must be retried outside a target (creating its bucket).
template <class Fn>
auto retry_transient(const RetryPolicy& policy, std::atomic<uint64_t>& retries, Fn&& fn) -> decltype(fn()) {
  for (int attempt = 1;; ++attempt) {
    try {
      return fn();
    } catch (const Error& e) {
      if (!e.transient()) throw;
      if (attempt >= policy.max_attempts) give_up(e, attempt);
    }
    ++retries;
    back_off(policy, attempt);
  }
}

}  // namespace keel::targets
