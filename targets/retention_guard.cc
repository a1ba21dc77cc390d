#include "targets/retention_guard.h"

#include <mutex>

#include "targets/target_decorator.h"

namespace keel::targets {
namespace {

class RetentionGuard : public TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;

  void set_write_retention(const std::optional<WriteRetention>& rule) override {
    inner().set_write_retention(rule);
    std::lock_guard lock(mu_);
    rule_ = rule;
  }

  void remove(const std::string& key) override {
    if (may_be_locked(key)) {
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

  // Keys the rule leaves unlocked (leases) keel never locks: no HEAD for them.
  bool may_be_locked(const std::string& key) const {
    std::lock_guard lock(mu_);
    return rule_ && rule_->for_key(key, 0).has_value();
  }

  mutable std::mutex mu_;
  std::optional<WriteRetention> rule_;
};

}  // namespace

std::unique_ptr<Target> make_retention_guard(std::unique_ptr<Target> inner) {
  return std::make_unique<RetentionGuard>(std::move(inner));
}

}  // namespace keel::targets
