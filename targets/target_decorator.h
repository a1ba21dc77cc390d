// The base of the targets that wrap another (retries, limits, metrics, fault
// injection): every call goes to the inner target unless the decorator
// overrides it, so a decorator states only what it adds. Stacked by
// targets/open_target.cc; docs/architecture.md shows the stack.
#pragma once

#include <memory>
#include <utility>

#include "targets/target.h"

namespace keel::targets {

// The same for the uploads a decorator hands out.
class UploadDecorator : public Upload {
 public:
  explicit UploadDecorator(std::unique_ptr<Upload> inner) : inner_(std::move(inner)) {}
  void write_part(uint32_t part_number, uint64_t offset, ByteView data) override {
    inner_->write_part(part_number, offset, data);
  }
  void commit() override { inner_->commit(); }
  void abort() noexcept override { inner_->abort(); }
  std::optional<Retention> retention() const override { return inner_->retention(); }

 protected:
  Upload& inner() const { return *inner_; }

 private:
  std::unique_ptr<Upload> inner_;
};

class TargetDecorator : public Target {
 public:
  explicit TargetDecorator(std::unique_ptr<Target> inner) : inner_(std::move(inner)) {}

  std::string describe() const override { return inner_->describe(); }
  uint64_t min_part_size() const override { return inner_->min_part_size(); }
  size_t read_concurrency() const override { return inner_->read_concurrency(); }
  uint64_t throttle_events() const override { return inner_->throttle_events(); }
  std::vector<std::pair<std::string, uint64_t>> transfer_stats() const override { return inner_->transfer_stats(); }

  std::unique_ptr<Upload> start_upload(const std::string& key) override { return inner_->start_upload(key); }
  void put(const std::string& key, ByteView data) override { inner_->put(key, data); }
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    return inner_->get_range(key, offset, out);
  }
  std::optional<ObjectInfo> head(const std::string& key) override { return inner_->head(key); }
  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    inner_->list(prefix, fn);
  }
  void remove(const std::string& key) override { inner_->remove(key); }
  size_t remove_stale_uploads(std::chrono::seconds min_age) override { return inner_->remove_stale_uploads(min_age); }
  bool object_lock_enabled() override { return inner_->object_lock_enabled(); }
  void set_write_retention(const std::optional<WriteRetention>& rule) override { inner_->set_write_retention(rule); }
  void extend_retention(const std::string& key, const Retention& retention) override {
    inner_->extend_retention(key, retention);
  }

 protected:
  Target& inner() const { return *inner_; }

 private:
  std::unique_ptr<Target> inner_;
};

}  // namespace keel::targets
