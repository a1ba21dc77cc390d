#include "engine/undelete.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/change_log.h"
#include "engine/keys.h"
#include "engine/pack.h"
#include "engine/repository_records.h"
#include "engine/sealed_object.h"
#include "util/error.h"

namespace keel::engine {
namespace {

using targets::ObjectVersion;

// The kinds of object keel verifies; other keys under the prefix (leases,
// condemnations, damaged/, foreign files) are left alone.
enum class Kind { kConfig, kKeySlot, kMigratedKeys, kSnapshot, kPack, kLogEntry, kCatalogCopy, kExternalRoots };

std::optional<Kind> kind_of(const std::string& key) {
  const auto under = [&](std::string_view prefix) { return key.rfind(prefix, 0) == 0; };
  if (key == "config") return Kind::kConfig;
  if (key == "external-roots") return Kind::kExternalRoots;
  if (key == kMigratedKeysKey) return Kind::kMigratedKeys;
  if (under("keys/")) return Kind::kKeySlot;
  if (under(kLogPrefix)) return log_key_time(key) ? std::optional(Kind::kLogEntry) : std::nullopt;
  if (under("catalog/")) return Kind::kCatalogCopy;
  if (!id_from_key(key)) return std::nullopt;
  if (under("snapshots/")) return Kind::kSnapshot;
  if (under("packs/")) return Kind::kPack;
  return std::nullopt;
}

// One version of one object seen as the current object of a read-only
// target, so that keel's readers (read_config, read_pack_header, ...) verify it.
class OneVersion final : public targets::Target {
 public:
  OneVersion(targets::VersionedStore& store, const ObjectVersion& version) : store_(store), version_(version) {}

  std::string describe() const override { return store_.describe(); }
  std::optional<targets::ObjectInfo> head(const std::string& key) override {
    if (key != version_.key) return std::nullopt;
    return targets::ObjectInfo{key, version_.size};
  }
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    if (key != version_.key) throw Error(ErrorKind::kNotFound, describe() + "/" + key + ": not the version examined");
    return store_.get_version_range(key, version_.version_id, offset, out);
  }
  void list(const std::string&, const std::function<void(const targets::ObjectInfo&)>&) override {}
  std::unique_ptr<targets::Upload> start_upload(const std::string& key) override { read_only(key); }
  void put(const std::string& key, ByteView) override { read_only(key); }
  void remove(const std::string& key) override { read_only(key); }
  size_t remove_stale_uploads(std::chrono::seconds) override { return 0; }

 private:
  [[noreturn]] void read_only(const std::string& key) const {
    throw Error(ErrorKind::kFailure, describe() + "/" + key + ": a version being verified is read-only");
  }
  targets::VersionedStore& store_;
  const ObjectVersion& version_;
};

class UndeleteRun {
 public:
  UndeleteRun(targets::VersionedStore& target, const UndeleteOptions& options) : target_(target), options_(options) {}

  UndeleteResult run() {
    std::map<std::string, std::vector<ObjectVersion>> versions;
    target_.list_versions("", [&](const ObjectVersion& v) {
      if (kind_of(v.key)) versions[v.key].push_back(v);
    });
    // Stores list each key's versions newest first; make sure of it.
    for (auto& [key, list] : versions) {
      std::stable_sort(list.begin(), list.end(), [](const ObjectVersion& a, const ObjectVersion& b) {
        return a.latest != b.latest ? a.latest : a.modified_unix > b.modified_unix;
      });
    }
    open_keys(versions);
    for (const auto& [key, list] : versions) {
      check_cancel();
      examine(key, list);
    }
    if (!options_.dry_run) apply();
    return std::move(result_);
  }

 private:
  void check_cancel() const {
    if (options_.cancel && options_.cancel->load()) throw Error(ErrorKind::kInterrupted, "repair --undelete interrupted");
  }

  // Why `v` fails keel's verification; nullopt if it passes.
  std::optional<std::string> failure(const ObjectVersion& v) {
    ++result_.versions_checked;
    OneVersion view(target_, v);
    const std::string what = target_.describe() + "/" + v.key + " version " + v.version_id;
    try {
      switch (*kind_of(v.key)) {
        case Kind::kKeySlot:
          read_key_slot_info(view.get(v.key), what);
          break;
        case Kind::kMigratedKeys:
          open_migrated_keys(*keys_, view.get(v.key), what);
          break;
        case Kind::kConfig:
          read_config_version(view);
          break;
        case Kind::kSnapshot:
          read_snapshot_object(view, reader(), *id_from_key(v.key));
          break;
        case Kind::kPack:
          read_pack_header(view, reader(), *id_from_key(v.key), v.size);
          break;
        case Kind::kLogEntry:
          read_log_entry_version(view, v.key);
          break;
        case Kind::kCatalogCopy: {
          // Frames under the data key follow; the magic tells a copy from garbage.
          constexpr std::string_view kCatalogMagic = "KEELCAT1";
          Bytes head(kCatalogMagic.size());
          if (view.get_range(v.key, 0, head) != head.size() || as_chars(head) != kCatalogMagic) {
            return "not a keel catalog copy";
          }
          break;
        }
        case Kind::kExternalRoots:
          break;  // plain text naming its holder: any version will do
      }
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      return e.what();
    }
    return std::nullopt;
  }

  // Full keys that read format-1 and format-2 objects alike.
  const MasterKeys& reader() const { return migrated_ ? *migrated_ : *keys_; }

  // A migrated repository's config versions are of either format.
  void read_config_version(targets::Target& view) {
    MasterKeys keys = *keys_;
    try {
      read_config(view, keys);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity || !migrated_) throw;
      keys = *migrated_;
      read_config(view, keys);
    }
  }

  // Entries written before a migration to format 2 are under the data key.
  void read_log_entry_version(targets::Target& view, const std::string& key) {
    try {
      read_log_entry(view, reader().index, key);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity || reader().index == reader().data) throw;
      read_log_entry(view, reader().data, key);
    }
  }

  // The newest version of `list` that passes verification; `why` gets the
  // failure of the newest one that does not.
  std::optional<size_t> newest_good(const std::vector<ObjectVersion>& list, std::string& why) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].delete_marker) continue;
      std::optional<std::string> failed = failure(list[i]);
      if (!failed) return i;
      if (why.empty()) why = *failed;
      failures_[&list[i]] = *failed;
    }
    return std::nullopt;
  }

  // The master keys, from the newest intact version of each key slot.
  void open_keys(const std::map<std::string, std::vector<ObjectVersion>>& versions) {
    size_t intact = 0;
    for (auto it = versions.lower_bound("keys/"); it != versions.end() && it->first.rfind("keys/", 0) == 0; ++it) {
      std::string why;
      std::optional<size_t> good = newest_good(it->second, why);
      if (!good) continue;
      ++intact;
      const ObjectVersion& v = it->second[*good];
      OneVersion view(target_, v);
      keys_ = open_key_slot(view.get(v.key), options_.password, target_.describe() + "/" + v.key);
      if (keys_) break;
    }
    if (!keys_) {
      throw Error(ErrorKind::kWrongPassword,
                  target_.describe() + ": no version of its key slots opens with the password (" +
                      std::to_string(intact) + " key slots have an intact version)");
    }
    if (!keys_->full()) {
      throw Error(ErrorKind::kUsage, "keel repair --undelete needs a full key: the password opens a put-only key, "
                                     "which cannot verify what it would bring back");
    }
    // A format-1 slot of a repository migrated to format 2 (engine/migrate.h):
    // the rest of its keys come from the newest version of keys-v2 that opens.
    auto migrated = versions.find(std::string(kMigratedKeysKey));
    if (keys_->format < 2 && migrated != versions.end()) {
      std::string why;
      if (std::optional<size_t> good = newest_good(migrated->second, why)) {
        const ObjectVersion& v = migrated->second[*good];
        OneVersion view(target_, v);
        migrated_ = open_migrated_keys(*keys_, view.get(v.key), target_.describe() + "/" + v.key);
      }
    }
  }

  void examine(const std::string& key, const std::vector<ObjectVersion>& list) {
    if (list.empty() || (!list.front().delete_marker && list.size() == 1)) return;
    std::string why;
    std::optional<size_t> good = newest_good(list, why);
    if (good == 0) return;  // the current version is good
    if (!good) {
      result_.skipped.push_back(key + ": no version passes verification" + (why.empty() ? " (only delete markers)" : " (" + why + ")"));
      return;
    }
    for (size_t i = 0; i < *good; ++i) {
      if (options_.since_unix && list[i].modified_unix < *options_.since_unix) {
        result_.skipped.push_back(key + ": hidden by " + (list[i].delete_marker ? "a delete marker" : "a version") +
                                  " of " + targets::iso8601_utc(list[i].modified_unix) + ", before --since");
        return;
      }
    }
    for (size_t i = 0; i < *good; ++i) {
      const ObjectVersion& v = list[i];
      result_.steps.push_back({key, v.version_id, v.delete_marker, v.modified_unix,
                               v.delete_marker ? "delete marker" : failures_.at(&v), ""});
    }
    result_.restored.push_back(key);
  }

  void apply() {
    std::set<std::string> refused;
    for (UndeleteStep& step : result_.steps) {
      check_cancel();
      try {
        target_.remove_version(step.key, step.version_id, options_.bypass_governance);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTargetIo) throw;
        step.error = e.what();
        refused.insert(step.key);
      }
    }
    std::erase_if(result_.restored, [&](const std::string& key) { return refused.count(key) > 0; });
  }

  targets::VersionedStore& target_;
  const UndeleteOptions& options_;
  UndeleteResult result_;
  std::optional<MasterKeys> keys_;
  std::optional<MasterKeys> migrated_;  // a migrated repository's format-2 keys, for a format-1 slot
  std::map<const ObjectVersion*, std::string> failures_;
};

}  // namespace

bool UndeleteResult::refused() const {
  return std::any_of(steps.begin(), steps.end(), [](const UndeleteStep& s) { return !s.error.empty(); });
}

UndeleteResult undelete(targets::VersionedStore& store, const UndeleteOptions& options) {
  return UndeleteRun(store, options).run();
}

}  // namespace keel::engine
