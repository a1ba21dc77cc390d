#include "targets/memory/memory_target.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "util/error.h"

namespace keel::targets::memory {

struct MemoryStore::PendingUpload {
  std::string key;
  std::optional<Retention> retention;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::map<uint32_t, std::pair<uint64_t, Bytes>> parts;  // number -> offset, bytes
  bool aborted = false;
};

std::map<std::string, Bytes> MemoryStore::objects() const {
  std::lock_guard lock(mu_);
  return objects_;
}

void MemoryStore::set_objects(std::map<std::string, Bytes> objects) {
  std::lock_guard lock(mu_);
  objects_ = std::move(objects);
  modified_.clear();
  const int64_t now = unix_now();
  for (const auto& entry : objects_) modified_[entry.first] = now;
}

size_t MemoryStore::open_uploads() const {
  std::lock_guard lock(mu_);
  return uploads_.size();
}

std::optional<Retention> MemoryStore::retention(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = retention_.find(key);
  if (it == retention_.end()) return std::nullopt;
  return it->second;
}

void MemoryStore::set_retention(const std::string& key, std::optional<Retention> retention) {
  std::lock_guard lock(mu_);
  if (retention) {
    retention_[key] = *retention;
  } else {
    retention_.erase(key);
  }
}

size_t MemoryStore::version_count(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = versions_.find(key);
  return it == versions_.end() ? 0 : it->second.size();
}

namespace {

// As S3 refuses it: a change to an object whose retention has not expired. Called under the store's lock.
void refuse_if_locked(const std::map<std::string, Retention>& retention, const std::string& key,
                      const std::string& where, const char* what) {
  auto it = retention.find(key);
  if (it == retention.end() || !it->second.locked_at(unix_now())) return;
  throw Error(ErrorKind::kTargetIo, where + ": AccessDenied: cannot " + what + " an object under " +
                                        lock_mode_name(it->second.mode) + " retention until " +
                                        iso8601_utc(it->second.until_unix));
}

size_t copy_range(const Bytes& data, uint64_t offset, std::span<uint8_t> out) {
  if (offset >= data.size()) return 0;
  const size_t n = std::min<uint64_t>(out.size(), data.size() - offset);
  std::memcpy(out.data(), data.data() + offset, n);
  return n;
}

}  // namespace

void MemoryStore::push_version(const std::string& key, StoredVersion version) {
  std::vector<StoredVersion>& versions = versions_[key];
  if (!versions.empty() && !versions.front().delete_marker) {
    auto current = retention_.find(key);  // the current version's lock may have been extended since
    versions.front().retention =
        current == retention_.end() ? std::nullopt : std::optional<Retention>(current->second);
  }
  version.id = "v" + std::to_string(next_version_++);
  version.modified_unix = unix_now();
  versions.insert(versions.begin(), std::move(version));
}

void MemoryStore::store(const std::string& key, Bytes data, const std::optional<Retention>& lock, bool versioned,
                        const std::string& where) {
  if (versioned) {
    push_version(key, {.data = data, .retention = lock});
  } else {
    refuse_if_locked(retention_, key, where, "overwrite");
  }
  objects_[key] = std::move(data);
  modified_[key] = unix_now();
  if (lock) {
    retention_[key] = *lock;
  } else {
    retention_.erase(key);
  }
}

void MemoryStore::erase(const std::string& key, bool versioned, const std::string& where) {
  if (versioned) {
    if (objects_.count(key)) push_version(key, {.delete_marker = true});
  } else {
    if (!objects_.count(key)) return;
    refuse_if_locked(retention_, key, where, "delete");
  }
  objects_.erase(key);
  modified_.erase(key);
  retention_.erase(key);
}

void MemoryStore::remove_version(const std::string& key, const std::string& version_id, bool bypass_governance,
                                 const std::string& where) {
  auto found = versions_.find(key);
  if (found == versions_.end()) return;
  std::vector<StoredVersion>& versions = found->second;
  auto it = std::find_if(versions.begin(), versions.end(), [&](const StoredVersion& v) { return v.id == version_id; });
  if (it == versions.end()) return;
  const bool current = it == versions.begin();
  std::optional<Retention> lock = it->retention;
  if (current && !it->delete_marker) {
    auto r = retention_.find(key);
    lock = r == retention_.end() ? std::nullopt : std::optional<Retention>(r->second);
  }
  if (lock && lock->locked_at(unix_now()) && !(bypass_governance && lock->mode == LockMode::kGovernance)) {
    throw Error(ErrorKind::kTargetIo, where + " version " + version_id + ": AccessDenied: cannot delete a version under " +
                                          lock_mode_name(lock->mode) + " retention until " +
                                          iso8601_utc(lock->until_unix));
  }
  versions.erase(it);
  if (!current) return;
  objects_.erase(key);
  modified_.erase(key);
  retention_.erase(key);
  if (versions.empty()) {
    versions_.erase(found);
  } else if (!versions.front().delete_marker) {
    objects_[key] = versions.front().data;
    modified_[key] = versions.front().modified_unix;
    if (versions.front().retention) retention_[key] = *versions.front().retention;
  }
}

class MemoryUpload : public Upload {
 public:
  MemoryUpload(std::shared_ptr<MemoryStore> store, std::string where, uint64_t id,
               std::shared_ptr<MemoryStore::PendingUpload> pending, bool versioned)
      : store_(std::move(store)), where_(std::move(where)), id_(id), pending_(std::move(pending)), versioned_(versioned) {}
  ~MemoryUpload() override { abort(); }

  void write_part(uint32_t part_number, uint64_t offset, ByteView data) override {
    std::lock_guard lock(store_->mu_);
    check_open("write_part");
    pending_->parts[part_number] = {offset, Bytes(data.begin(), data.end())};
  }

  void commit() override {
    std::lock_guard lock(store_->mu_);
    if (committed_) return;  // a retry of a commit whose reply was lost
    check_open("commit");
    Bytes whole;
    uint32_t expected = 1;
    for (auto& [number, part] : pending_->parts) {
      if (number != expected++ || part.first != whole.size()) {
        throw Error(ErrorKind::kFailure, where_ + ": part " + std::to_string(expected - 1) + " missing at commit");
      }
      whole.insert(whole.end(), part.second.begin(), part.second.end());
    }
    store_->store(pending_->key, std::move(whole), pending_->retention, versioned_, where_);
    store_->uploads_.erase(id_);
    done_ = committed_ = true;
  }

  void abort() noexcept override {
    std::lock_guard lock(store_->mu_);
    if (done_) return;
    done_ = true;
    pending_->aborted = true;
    store_->uploads_.erase(id_);
  }

  std::optional<Retention> retention() const override { return pending_->retention; }

 private:
  void check_open(const char* what) const {
    if (done_) throw Error(ErrorKind::kFailure, std::string(what) + " after commit or abort on " + where_);
    if (pending_->aborted) throw Error(ErrorKind::kTargetIo, where_ + ": the upload was aborted (as stale)");
  }

  std::shared_ptr<MemoryStore> store_;
  std::string where_;
  uint64_t id_;
  std::shared_ptr<MemoryStore::PendingUpload> pending_;
  bool versioned_;
  bool done_ = false, committed_ = false;
};

class MemoryTarget : public Target {
 public:
  MemoryTarget(std::shared_ptr<MemoryStore> store, MemoryTargetOptions options)
      : store_(std::move(store)), options_(std::move(options)) {}

  std::string describe() const override { return "memory:" + options_.name; }
  uint64_t min_part_size() const override { return options_.min_part_size; }
  size_t read_concurrency() const override { return options_.read_concurrency; }

  std::unique_ptr<Upload> start_upload(const std::string& key) override {
    auto pending = std::make_shared<MemoryStore::PendingUpload>();
    pending->key = key;
    pending->retention = retention_for(key);
    std::lock_guard lock(store_->mu_);
    const uint64_t id = store_->next_upload_++;
    store_->uploads_[id] = pending;
    return std::make_unique<MemoryUpload>(store_, where(key), id, pending, options_.versioning);
  }

  void put(const std::string& key, ByteView data) override {
    Bytes copy(data.begin(), data.end());
    const std::optional<Retention> lock_until = retention_for(key);
    std::lock_guard lock(store_->mu_);
    store_->store(key, std::move(copy), lock_until, options_.versioning, where(key));
  }

  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    std::lock_guard lock(store_->mu_);
    auto it = store_->objects_.find(key);
    if (it == store_->objects_.end()) throw Error(ErrorKind::kNotFound, where(key) + ": no such object");
    return copy_range(it->second, offset, out);
  }

  std::optional<ObjectInfo> head(const std::string& key) override {
    std::lock_guard lock(store_->mu_);
    auto it = store_->objects_.find(key);
    if (it == store_->objects_.end()) return std::nullopt;
    auto retention = store_->retention_.find(key);
    return ObjectInfo{key, it->second.size(),
                      retention == store_->retention_.end() ? std::nullopt : std::optional(retention->second)};
  }

  // `fn` runs on a copy of the listing: it may use the target.
  void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) override {
    std::vector<ObjectInfo> found;
    {
      std::lock_guard lock(store_->mu_);
      for (auto it = store_->objects_.lower_bound(prefix);
           it != store_->objects_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        found.push_back({.key = it->first, .size = it->second.size(), .modified_unix = store_->modified_.at(it->first)});
      }
    }
    for (const ObjectInfo& info : found) fn(info);
  }

  void remove(const std::string& key) override {
    std::lock_guard lock(store_->mu_);
    store_->erase(key, options_.versioning, where(key));
  }

  bool object_lock_enabled() override { return options_.object_lock; }

  void set_write_retention(const std::optional<WriteRetention>& rule) override {
    if (rule && !options_.object_lock) Target::set_write_retention(rule);
    std::lock_guard lock(rule_mu_);
    write_retention_ = rule;
  }

  void extend_retention(const std::string& key, const Retention& retention) override {
    if (!options_.object_lock) Target::extend_retention(key, retention);
    std::lock_guard lock(store_->mu_);
    if (!store_->objects_.count(key)) throw Error(ErrorKind::kNotFound, where(key) + ": no such object");
    auto it = store_->retention_.find(key);
    if (it != store_->retention_.end() && it->second.locked_at(unix_now()) &&
        (it->second.mode != retention.mode || it->second.until_unix > retention.until_unix)) {
      throw Error(ErrorKind::kTargetIo, where(key) + ": AccessDenied: a retention can be extended, not shortened");
    }
    store_->retention_[key] = retention;
  }

  size_t remove_stale_uploads(std::chrono::seconds min_age) override {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(store_->mu_);
    size_t removed = 0;
    for (auto it = store_->uploads_.begin(); it != store_->uploads_.end();) {
      if (now - it->second->started < min_age) {
        ++it;
        continue;
      }
      it->second->aborted = true;
      it = store_->uploads_.erase(it);
      ++removed;
    }
    return removed;
  }

 private:
  std::string where(const std::string& key) const { return describe() + "/" + key; }
  std::optional<Retention> retention_for(const std::string& key) const {
    std::lock_guard lock(rule_mu_);
    if (!write_retention_) return std::nullopt;
    return write_retention_->for_key(key, unix_now());
  }

  std::shared_ptr<MemoryStore> store_;
  MemoryTargetOptions options_;
  mutable std::mutex rule_mu_;
  std::optional<WriteRetention> write_retention_;
};

// The versions of a versioned store, as an administrator lists and removes them.
class MemoryVersions : public VersionedStore {
 public:
  MemoryVersions(std::shared_ptr<MemoryStore> store, std::string name) : store_(std::move(store)), name_(std::move(name)) {}

  std::string describe() const override { return "memory:" + name_; }

  void list_versions(const std::string& prefix, const std::function<void(const ObjectVersion&)>& fn) override {
    std::vector<ObjectVersion> found;
    {
      std::lock_guard lock(store_->mu_);
      for (auto it = store_->versions_.lower_bound(prefix);
           it != store_->versions_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        bool latest = true;
        for (const MemoryStore::StoredVersion& v : it->second) {
          found.push_back({it->first, v.id, v.delete_marker, latest, v.data.size(), v.modified_unix});
          latest = false;
        }
      }
    }
    for (const ObjectVersion& v : found) fn(v);
  }

  size_t get_version_range(const std::string& key, const std::string& version_id, uint64_t offset,
                           std::span<uint8_t> out) override {
    std::lock_guard lock(store_->mu_);
    auto found = store_->versions_.find(key);
    if (found != store_->versions_.end()) {
      for (const MemoryStore::StoredVersion& v : found->second) {
        if (v.id != version_id || v.delete_marker) continue;
        return copy_range(v.data, offset, out);
      }
    }
    throw Error(ErrorKind::kNotFound, where(key) + " version " + version_id + ": no such version");
  }

  void remove_version(const std::string& key, const std::string& version_id, bool bypass_governance) override {
    std::lock_guard lock(store_->mu_);
    store_->remove_version(key, version_id, bypass_governance, where(key));
  }

 private:
  std::string where(const std::string& key) const { return describe() + "/" + key; }

  std::shared_ptr<MemoryStore> store_;
  std::string name_;
};

std::unique_ptr<Target> open_memory_target(std::shared_ptr<MemoryStore> store, MemoryTargetOptions options) {
  return std::make_unique<MemoryTarget>(std::move(store), std::move(options));
}

std::unique_ptr<VersionedStore> open_memory_versions(std::shared_ptr<MemoryStore> store, std::string name) {
  return std::make_unique<MemoryVersions>(std::move(store), std::move(name));
}

}  // namespace keel::targets::memory
