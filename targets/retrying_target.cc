#include "targets/retrying_target.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>

#include "targets/target_decorator.h"

namespace keel::targets {

void back_off(const RetryPolicy& policy, int attempt) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  // Full jitter: a random wait up to an exponentially growing ceiling.
  const int64_t ceiling = std::min<int64_t>(policy.cap.count(), policy.base.count() << std::min(attempt, 20));
  std::uniform_int_distribution<int64_t> wait(0, std::max<int64_t>(1, ceiling));
  std::this_thread::sleep_for(std::chrono::milliseconds(wait(rng)));
}

void give_up(const Error& last, int attempts) {
  if (attempts <= 1) throw last;
  throw Error(last.kind(), std::string(last.what()) + " (gave up after " + std::to_string(attempts) + " attempts)",
              Persistence::kTransient);
}

namespace {

// Carries an exception of a listing's callback past the retry loop.
struct CallerFailed {};

class RetryingUpload : public UploadDecorator {
 public:
  RetryingUpload(std::unique_ptr<Upload> inner, const RetryPolicy& policy, std::atomic<uint64_t>& retries)
      : UploadDecorator(std::move(inner)), policy_(policy), retries_(retries) {}

  void write_part(uint32_t part_number, uint64_t offset, ByteView data) override {
    retry_transient(policy_, retries_, [&] { inner().write_part(part_number, offset, data); });
  }
  // A commit whose reply was lost and is tried again finds its object
  // already there; the inner target says so (S3: NoSuchUpload + the ETag).
  void commit() override {
    retry_transient(policy_, retries_, [&] { inner().commit(); });
  }

 private:
  const RetryPolicy& policy_;
  std::atomic<uint64_t>& retries_;
};

class RetryingTarget : public TargetDecorator {
 public:
  RetryingTarget(std::unique_ptr<Target> inner, RetryPolicy policy)
      : TargetDecorator(std::move(inner)), policy_(policy) {}

  uint64_t throttle_events() const override { return retries_ + inner().throttle_events(); }
  std::vector<std::pair<std::string, uint64_t>> transfer_stats() const override {
    auto out = inner().transfer_stats();
    out.emplace_back("retries", retries_.load());
    return out;
  }

  std::unique_ptr<Upload> start_upload(const std::string& key) override {
    return std::make_unique<RetryingUpload>(retry([&] { return inner().start_upload(key); }), policy_, retries_);
  }
  void put(const std::string& key, ByteView data) override {
    retry([&] { inner().put(key, data); });
  }
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    return retry([&] { return inner().get_range(key, offset, out); });
  }
  std::optional<ObjectInfo> head(const std::string& key) override {
    return retry([&] { return inner().head(key); });
  }
  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    // Keys already handed over are skipped when a listing starts again; an
    // exception from `fn` is the caller's and is not retried.
    std::unordered_set<std::string> delivered;
    std::exception_ptr caller_error;
    try {
      retry([&] {
        inner().list(prefix, [&](const ObjectInfo& info) {
          if (!delivered.insert(info.key).second) return;
          try {
            fn(info);
          } catch (...) {
            caller_error = std::current_exception();
            throw CallerFailed{};
          }
        });
      });
    } catch (const CallerFailed&) {
      std::rethrow_exception(caller_error);
    }
  }
  void remove(const std::string& key) override {
    retry([&] { inner().remove(key); });
  }
  size_t remove_stale_uploads(std::chrono::seconds min_age) override {
    return retry([&] { return inner().remove_stale_uploads(min_age); });
  }
  bool object_lock_enabled() override {
    return retry([&] { return inner().object_lock_enabled(); });
  }
  void extend_retention(const std::string& key, const Retention& retention) override {
    retry([&] { inner().extend_retention(key, retention); });
  }

 private:
  template <class Fn>
  auto retry(Fn&& fn) -> decltype(fn()) {
    return retry_transient(policy_, retries_, std::forward<Fn>(fn));
  }

  RetryPolicy policy_;
  mutable std::atomic<uint64_t> retries_{0};
};

}  // namespace

std::unique_ptr<Target> make_retrying_target(std::unique_ptr<Target> inner, RetryPolicy policy) {
  return std::make_unique<RetryingTarget>(std::move(inner), policy);
}

}  // namespace keel::targets
