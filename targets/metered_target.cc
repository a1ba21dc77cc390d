#include "targets/metered_target.h"

#include <array>
#include <atomic>
#include <chrono>

#include "targets/target_decorator.h"

namespace keel::targets {
namespace {

enum Operation { kPut, kGet, kHead, kList, kRemove, kUploadStart, kUploadPart, kUploadCommit, kRetention, kOperations };
constexpr std::array<const char*, kOperations> kNames = {"put",          "get",         "head",          "list",
                                                          "remove",       "upload_start", "upload_part", "upload_commit",
                                                          "retention"};

struct Meter {
  std::atomic<uint64_t> calls{0}, errors{0}, bytes{0}, microseconds{0};
};

using Meters = std::array<Meter, kOperations>;

// Times `fn` into `meter` and counts it, as an error too if it throws.
template <class Fn>
auto measure(Meter& meter, Fn&& fn) -> decltype(fn()) {
  const auto started = std::chrono::steady_clock::now();
  struct Stop {
    Meter& meter;
    std::chrono::steady_clock::time_point started;
    ~Stop() {
      ++meter.calls;
      meter.microseconds += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count());
    }
  } stop{meter, started};
  try {
    return fn();
  } catch (...) {
    ++meter.errors;
    throw;
  }
}

class MeteredUpload : public UploadDecorator {
 public:
  MeteredUpload(std::unique_ptr<Upload> inner, Meters& meters) : UploadDecorator(std::move(inner)), meters_(meters) {}
  void write_part(uint32_t part_number, uint64_t offset, ByteView data) override {
    measure(meters_[kUploadPart], [&] { inner().write_part(part_number, offset, data); });
    meters_[kUploadPart].bytes += data.size();
  }
  void commit() override {
    measure(meters_[kUploadCommit], [&] { inner().commit(); });
  }

 private:
  Meters& meters_;
};

class MeteredTarget : public TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;

  std::vector<std::pair<std::string, uint64_t>> transfer_stats() const override {
    auto out = inner().transfer_stats();
    for (size_t i = 0; i < kOperations; ++i) {
      const std::string name = kNames[i];
      out.emplace_back(name + "_calls", meters_[i].calls.load());
      out.emplace_back(name + "_errors", meters_[i].errors.load());
      out.emplace_back(name + "_bytes", meters_[i].bytes.load());
      out.emplace_back(name + "_microseconds", meters_[i].microseconds.load());
    }
    return out;
  }

  std::unique_ptr<Upload> start_upload(const std::string& key) override {
    return std::make_unique<MeteredUpload>(measure(meters_[kUploadStart], [&] { return inner().start_upload(key); }),
                                           meters_);
  }
  void put(const std::string& key, ByteView data) override {
    measure(meters_[kPut], [&] { inner().put(key, data); });
    meters_[kPut].bytes += data.size();
  }
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    size_t n = measure(meters_[kGet], [&] { return inner().get_range(key, offset, out); });
    meters_[kGet].bytes += n;
    return n;
  }
  std::optional<ObjectInfo> head(const std::string& key) override {
    return measure(meters_[kHead], [&] { return inner().head(key); });
  }
  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    measure(meters_[kList], [&] { inner().list(prefix, fn); });
  }
  void remove(const std::string& key) override {
    measure(meters_[kRemove], [&] { inner().remove(key); });
  }
  void extend_retention(const std::string& key, const Retention& retention) override {
    measure(meters_[kRetention], [&] { inner().extend_retention(key, retention); });
  }

 private:
  mutable Meters meters_;
};

}  // namespace

std::unique_ptr<Target> make_metered_target(std::unique_ptr<Target> inner) {
  return std::make_unique<MeteredTarget>(std::move(inner));
}

}  // namespace keel::targets
