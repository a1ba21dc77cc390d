#include "targets/fault_injecting_target.h"

#include <thread>
#include <utility>

#include "targets/target_decorator.h"

namespace keel::targets {

const char* target_op_name(TargetOp op) {
  switch (op) {
    case TargetOp::kPut: return "put";
    case TargetOp::kGetRange: return "get_range";
    case TargetOp::kHead: return "head";
    case TargetOp::kList: return "list";
    case TargetOp::kRemove: return "remove";
    case TargetOp::kStartUpload: return "start_upload";
    case TargetOp::kWritePart: return "write_part";
    case TargetOp::kCommit: return "commit";
    case TargetOp::kRemoveStaleUploads: return "remove_stale_uploads";
  }
  return "?";
}

const char* fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::kError: return "error";
    case FaultKind::kLostResponse: return "lost-response";
    case FaultKind::kTruncatedRead: return "truncated-read";
    case FaultKind::kCorruptRead: return "corrupt-read";
    case FaultKind::kDelay: return "delay";
  }
  return "?";
}

namespace {

// Runs one call through the injector's decision.
class Fault {
 public:
  Fault(FaultInjector& injector, const std::string& where, TargetOp op, const std::string& key)
      : decision_(injector.decide(op, key, std::string(target_op_name(op)) + " " + key,
                                  [](const FaultRule& rule) { return fault_kind_name(rule.kind); })),
        what_(where + "/" + key + ": injected fault on " + target_op_name(op)) {
    if (!decision_.rule) return;
    const FaultRule& rule = *decision_.rule;
    if (rule.kind == FaultKind::kDelay && rule.delay.count() > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(decision_.random % (rule.delay.count() * 1000 + 1)));
    }
    if (rule.kind == FaultKind::kError) fail("");
  }
  // After the inner call has run.
  void after() const {
    if (decision_.rule && decision_.rule->kind == FaultKind::kLostResponse) fail(" (after it was done)");
  }
  // Mangles what a read handed back; returns the length to report.
  size_t after_read(std::span<uint8_t> out, size_t n) const {
    after();
    if (!decision_.rule || n == 0) return n;
    if (decision_.rule->kind == FaultKind::kTruncatedRead) return decision_.random % n;
    if (decision_.rule->kind == FaultKind::kCorruptRead) out[decision_.random % n] ^= 0x20;
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& when) const {
    const FaultRule& rule = *decision_.rule;
    throw Error(rule.error, what_ + when + " (call " + std::to_string(decision_.call) + ")", rule.persistence);
  }

  FaultInjector::Decision decision_;
  std::string what_;
};

class FaultInjectingUpload : public UploadDecorator {
 public:
  FaultInjectingUpload(std::unique_ptr<Upload> inner, FaultInjector& injector, std::string where, std::string key)
      : UploadDecorator(std::move(inner)), injector_(injector), where_(std::move(where)), key_(std::move(key)) {}
  void write_part(uint32_t part_number, uint64_t offset, ByteView data) override {
    Fault fault(injector_, where_, TargetOp::kWritePart, key_);
    inner().write_part(part_number, offset, data);
    fault.after();
  }
  void commit() override {
    Fault fault(injector_, where_, TargetOp::kCommit, key_);
    inner().commit();
    fault.after();
  }

 private:
  FaultInjector& injector_;
  std::string where_, key_;
};

class FaultInjectingTarget : public TargetDecorator {
 public:
  FaultInjectingTarget(std::unique_ptr<Target> inner, std::shared_ptr<FaultInjector> injector)
      : TargetDecorator(std::move(inner)), injector_(std::move(injector)), where_(describe()) {}

  std::unique_ptr<Upload> start_upload(const std::string& key) override {
    Fault fault(*injector_, where_, TargetOp::kStartUpload, key);
    auto upload = std::make_unique<FaultInjectingUpload>(inner().start_upload(key), *injector_, where_, key);
    fault.after();
    return upload;
  }
  void put(const std::string& key, ByteView data) override {
    Fault fault(*injector_, where_, TargetOp::kPut, key);
    inner().put(key, data);
    fault.after();
  }
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    Fault fault(*injector_, where_, TargetOp::kGetRange, key);
    return fault.after_read(out, inner().get_range(key, offset, out));
  }
  std::optional<ObjectInfo> head(const std::string& key) override {
    Fault fault(*injector_, where_, TargetOp::kHead, key);
    auto info = inner().head(key);
    fault.after();
    return info;
  }
  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    Fault fault(*injector_, where_, TargetOp::kList, prefix);
    inner().list(prefix, fn);
    fault.after();
  }
  void remove(const std::string& key) override {
    Fault fault(*injector_, where_, TargetOp::kRemove, key);
    inner().remove(key);
    fault.after();
  }
  size_t remove_stale_uploads(std::chrono::seconds min_age) override {
    Fault fault(*injector_, where_, TargetOp::kRemoveStaleUploads, "");
    size_t n = inner().remove_stale_uploads(min_age);
    fault.after();
    return n;
  }

 private:
  std::shared_ptr<FaultInjector> injector_;
  std::string where_;
};

}  // namespace

std::unique_ptr<Target> make_fault_injecting_target(std::unique_ptr<Target> inner,
                                                    std::shared_ptr<FaultInjector> injector) {
  return std::make_unique<FaultInjectingTarget>(std::move(inner), std::move(injector));
}

}  // namespace keel::targets
