#include "targets/limited_target.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "targets/target_decorator.h"

namespace keel::targets {
namespace {

using Clock = std::chrono::steady_clock;

// At most `limit` holders at once (none when 0).
class Gate {
 public:
  explicit Gate(size_t limit) : limit_(limit) {}
  void enter() {
    if (!limit_) return;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return inside_ < limit_; });
    ++inside_;
  }
  void leave() {
    if (!limit_) return;
    {
      std::lock_guard lock(mu_);
      --inside_;
    }
    cv_.notify_one();
  }

 private:
  const size_t limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t inside_ = 0;
};

// Paces transfers to `rate` bytes a second: each reserves its share of the
// line after those before it and waits for its slot to begin.
class Pacer {
 public:
  explicit Pacer(uint64_t rate) : rate_(rate) {}
  void take(uint64_t bytes) {
    if (!rate_ || !bytes) return;
    Clock::time_point start;
    {
      std::lock_guard lock(mu_);
      const Clock::time_point now = Clock::now();
      start = std::max(now, next_free_);
      next_free_ = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(static_cast<double>(bytes) / static_cast<double>(rate_)));
    }
    std::this_thread::sleep_until(start);
  }

 private:
  const uint64_t rate_;
  std::mutex mu_;
  Clock::time_point next_free_{};
};

struct Limiter {
  explicit Limiter(const TargetLimits& limits)
      : gate(limits.max_in_flight), upload(limits.upload_bytes_per_second), download(limits.download_bytes_per_second) {}
  template <class Fn>
  auto within(Fn&& fn) -> decltype(fn()) {
    gate.enter();
    struct Leave {
      Gate& gate;
      ~Leave() { gate.leave(); }
    } leave{gate};
    return fn();
  }
  Gate gate;
  Pacer upload, download;
};

class LimitedUpload : public UploadDecorator {
 public:
  LimitedUpload(std::unique_ptr<Upload> inner, Limiter& limiter) : UploadDecorator(std::move(inner)), limiter_(limiter) {}
  void write_part(uint32_t part_number, uint64_t offset, ByteView data) override {
    limiter_.upload.take(data.size());
    limiter_.within([&] { inner().write_part(part_number, offset, data); });
  }
  void commit() override {
    limiter_.within([&] { inner().commit(); });
  }

 private:
  Limiter& limiter_;
};

class LimitedTarget : public TargetDecorator {
 public:
  LimitedTarget(std::unique_ptr<Target> inner, const TargetLimits& limits)
      : TargetDecorator(std::move(inner)), max_in_flight_(limits.max_in_flight), limiter_(limits) {}

  size_t read_concurrency() const override {
    const size_t inner_wants = inner().read_concurrency();
    if (!max_in_flight_) return inner_wants;
    return inner_wants ? std::min(inner_wants, max_in_flight_) : max_in_flight_;
  }

  std::unique_ptr<Upload> start_upload(const std::string& key) override {
    return std::make_unique<LimitedUpload>(limiter_.within([&] { return inner().start_upload(key); }), limiter_);
  }
  void put(const std::string& key, ByteView data) override {
    limiter_.upload.take(data.size());
    limiter_.within([&] { inner().put(key, data); });
  }
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    limiter_.download.take(out.size());
    return limiter_.within([&] { return inner().get_range(key, offset, out); });
  }
  std::optional<ObjectInfo> head(const std::string& key) override {
    return limiter_.within([&] { return inner().head(key); });
  }
  // The caller's `fn` runs outside the gate: it may use the target itself.
  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    std::vector<ObjectInfo> found;
    limiter_.within([&] { inner().list(prefix, [&](const ObjectInfo& info) { found.push_back(info); }); });
    for (const ObjectInfo& info : found) fn(info);
  }
  void remove(const std::string& key) override {
    limiter_.within([&] { inner().remove(key); });
  }

 private:
  const size_t max_in_flight_;
  Limiter limiter_;
};

}  // namespace

std::unique_ptr<Target> make_limited_target(std::unique_ptr<Target> inner, TargetLimits limits) {
  if (!limits.any()) return inner;
  return std::make_unique<LimitedTarget>(std::move(inner), limits);
}

}  // namespace keel::targets
