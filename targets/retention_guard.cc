#include "targets/retention_guard.h"

#include <atomic>

#include "targets/target_decorator.h"

namespace keel::targets {
namespace {

class RetentionGuard : public TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;

  void set_write_retention(const std::optional<WriteRetention>& rule) override {
    inner().set_write_retention(rule);
    guarding_ = rule.has_value();
  }

  void remove(const std::string& key) override {
    if (guarding_) {
      const std::optional<ObjectInfo> info = inner().head(key);
      if (!info) return;  // removing a missing key is not an error
      if (info->retention && info->retention->locked_at(unix_now())) throw_locked(where(key), *info->retention);
    }
    inner().remove(key);
  }

 private:
  std::string where(const std::string& key) const {
    const std::string root = describe();
    return root + (root.ends_with("/") ? "" : "/") + key;
  }

  std::atomic<bool> guarding_{false};
};

}  // namespace

std::unique_ptr<Target> make_retention_guard(std::unique_ptr<Target> inner) {
  return std::make_unique<RetentionGuard>(std::move(inner));
}

}  // namespace keel::targets
