// An open repository: its target, keys, configuration and local catalog.
//
// On the target (sealed under the data key in format 1; format 2 splits the
// keys so that put-only keys can write but not read: keys.h, pack_keys.h):
//   config              format version, repository id, chunker and pack settings
//   keys/<id>           key slots: the master keys wrapped by a password (scrypt)
//   packs/<xx>/<id>     packs of data and tree blobs (see pack.h)
//   snapshots/<id>      snapshot records
//   log/<time>-<random> the change log: what each command added or removed (change_log.h)
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "engine/change_log.h"
#include "engine/chunker.h"
#include "engine/compress.h"
#include "engine/content.h"
#include "engine/keys.h"
#include "engine/pack_keys.h"
#include "engine/tree.h"
#include "targets/target.h"

namespace keel::engine {

// An Object Lock repository's retention (docs/immutable.md): every object
// keel writes but leases and condemnations is locked in `mode` for at least
// `period`, and each snapshot's packs stay locked `period` past it.
struct ObjectLockConfig {
  targets::LockMode mode = targets::LockMode::kGovernance;
  std::chrono::seconds period{0};
};

struct RepoConfig {
  uint32_t version = 1;  // the repository format: 1, or 2 (put-only keys possible)
  Id repository_id;
  ChunkerParams chunker;
  int compression_level = kCompressionDefault;  // zstd (compress.h); 0 stores everything raw
  uint64_t pack_size = 64ull << 20;
  uint64_t part_size = 8ull << 20;
  std::optional<ObjectLockConfig> object_lock;
};

inline constexpr std::string_view kInMemoryCatalog = ":memory:";

struct OpenOptions {
  std::string password;
  // Where the catalog lives; empty: $XDG_DATA_HOME/keel/<repository id>/catalog.db;
  // kInMemoryCatalog: in memory, gone when the repository closes (tests).
  std::string catalog_path;
  // Receives warnings about damage the repository works around (a damaged
  // snapshot skipped, a corrupt catalog moved aside); unset: kept in
  // Repository::warnings() only.
  std::function<void(const std::string&)> on_warning;
};

class Repository {
 public:
  // Creates a repository on an empty target. Throws Error(kRepository) if
  // the target already holds one.
  static std::unique_ptr<Repository> init(std::unique_ptr<targets::Target> target, const RepoConfig& config,
                                          const OpenOptions& options);
  // Opens an existing one. Throws Error(kRepository) if there is none,
  // Error(kWrongPassword) if no key slot opens with the password. A new or
  // empty catalog is filled from the target.
  static std::unique_ptr<Repository> open(std::unique_ptr<targets::Target> target, const OpenOptions& options);

  targets::Target& target() { return *target_; }
  catalog::Catalog& catalog() { return *catalog_; }
  const MasterKeys& keys() const { return keys_; }
  // Seals the blobs this process writes (pack_keys.h).
  const Key256& write_key() const { return pack_keys_->write_key(); }
  bool put_only() const { return !keys_.full(); }
  // Throws Error(kUsage) naming `command` unless the key that opened the
  // repository is a full key: put-only keys read nothing back.
  void require_full_key(std::string_view command) const;
  const RepoConfig& config() const { return config_; }
  const Id& key_slot() const { return slot_; }  // the slot that opened it
  const std::string& catalog_path() const { return catalog_path_; }

  // Blobs in packs: verified reads and indexed writes (content.h).
  Content& content() { return *content_; }
  // One blob, located through the catalog (Content::read).
  Bytes read_blob(const Id& id) { return content_->read(id); }
  Tree load_tree(const Id& id);  // catalog first, else from its pack (cached back)
  std::optional<Tree> cached_tree(const Id& id);  // the catalog's copy alone
  // Stores a tree's body in the catalog (the caller stores the blob).
  void cache_tree(const Id& id, ByteView body) { catalog_->put_tree(id, body); }

  // Snapshots (format 2: a header with time, host, tags and parent under the
  // index key, the record sealed to the public key; a put-only key reads
  // the header alone): written to the target first, then logged with the packs
  // the snapshot needs that this process wrote (`packs`), then to the catalog.
  void save_snapshot(const catalog::SnapshotRecord& snapshot, std::vector<LoggedPack> packs = {});
  // The snapshot record on the target, authenticated; nullopt if it is not
  // there. Throws Error(kIntegrity) if it is damaged.
  std::optional<catalog::SnapshotRecord> read_snapshot(const Id& id);
  // "latest", or a unique prefix of an id (4+ hex digits). Throws kNotFound.
  catalog::SnapshotRecord find_snapshot(std::string_view spec);

  // Brings the catalog up to date with the target: indexes packs and
  // snapshots it does not know yet (from an interrupted run, another host,
  // or a lost catalog) and caches their trees. A damaged snapshot object is
  // skipped with a warning, as is a tree it cannot cache. Returns the packs added.
  // Lists every pack, snapshot and condemnation: see follow_log.
  size_t sync_catalog();
  // The cheap sync every command does when it opens the repository: applies
  // the change-log entries (change_log.h) this catalog has not applied yet,
  // reading only log/, those entries and one listing of snapshots/ (a
  // snapshot removed without an entry leaves the catalog too); falls back
  // to sync_catalog where it cannot be sure that the log tells it everything.
  void follow_log();
  // Appends a log entry naming `changes` (after they are on the target).
  void log_changes(const ChangeLogEntry& changes);
  // Drops everything rebuildable from the catalog and reads it back. A
  // catalog file SQLite finds damaged is moved aside and replaced (a
  // warning says where it went); the caller imports history.
  void rebuild_catalog();

  // Damage worked around so far, as passed to OpenOptions::on_warning.
  const std::vector<std::string>& warnings() const { return warnings_; }
  void warn(const std::string& message);

  // Key slots.
  std::vector<KeySlotInfo> list_key_slots();
  // A put-only slot needs a full key and a format-2 repository.
  KeySlotInfo add_key_slot(std::string_view password, KeyKind kind = KeyKind::kFull);
  // Refuses to remove the last slot or the one in use.
  void remove_key_slot(const Id& slot);

 private:
  Repository(std::unique_ptr<targets::Target> target, RepoConfig config, MasterKeys keys, Id slot);
  // Opens the catalog; one SQLite finds damaged is moved aside and a new
  // one made (filled by open's first sync, history from a catalog copy).
  void open_catalog(const std::string& path);
  void attach_catalog();
  void replace_damaged_catalog(const catalog::CorruptDatabase& damage);
  void cache_trees_from(const Id& root);
  size_t sync_with_listing();
  // One listing of snapshots/. It is authoritative for "gone" only for the
  // snapshots this catalog held before it began: every snapshot is on the
  // target before any catalog has it, while one a backup writes meanwhile
  // (here, or on another host) may be missing from it.
  struct SnapshotListing {
    std::set<Id> known_before;  // in the catalog before the listing
    std::set<Id> listed;
  };
  // Lists snapshots/ and drops from the catalog those it held before that
  // the listing lacks (forgotten, logged or not).
  SnapshotListing list_snapshots_dropping_gone();
  void apply_log(const std::vector<ChangeLogEntry>& entries, const SnapshotListing& snapshots);
  void remember_log(const std::vector<std::string>& keys);
  // Of the objects under `prefix` that log entries claim removed, those
  // really gone from the target. forget and prune log a removal only after
  // it, but a put-only key seals log entries too (it holds the index key):
  // a claimed object still there stays in the catalog, with a warning. A
  // few are asked one by one (HEAD), more by one listing of `prefix`; none
  // where the caller has listed `prefix` since the entries were (`listed`).
  std::vector<Id> removed_from_target(std::string_view prefix, const std::vector<Id>& claimed,
                                      std::string (*key_of)(const Id&), const std::set<Id>* listed = nullptr);
  static constexpr size_t kHeadsBeforeListing = 8;
  void recover_missing_pack(const Id& pack, std::span<const Id> blobs);
  std::optional<catalog::SnapshotRecord> read_snapshot_or_warn(const Id& id);
  std::optional<PackHeader> read_pack_header_or_warn(const Id& pack, uint64_t size);
  // Adds a pack that another writer wrote. One indexed before without a
  // vouch (pack_vouch.h) whose records now come vouched is indexed afresh:
  // its earlier records may have come from a forged log entry.
  void index_pack(catalog::PackRecord pack, std::span<const catalog::BlobRecord> blobs);
  // A full key of format 2 judges, from their headers, the packs a put-only
  // key indexed into this catalog (it cannot check vouches): one header
  // read per such pack, once. Without it, a host that used both kinds of
  // key with one catalog would store again whatever the put-only key had
  // indexed.
  void judge_packs();
  void cache_trees_or_warn(const catalog::SnapshotRecord& snapshot);

  std::unique_ptr<targets::Target> target_;
  RepoConfig config_;
  MasterKeys keys_;
  std::unique_ptr<PackKeys> pack_keys_;
  Id slot_;
  std::string catalog_path_;
  std::unique_ptr<catalog::Catalog> catalog_;
  std::unique_ptr<Content> content_;
  std::mutex recover_mutex_;
  std::set<Id> recovered_packs_;  // missing packs already synced for
  std::set<Id> reread_packs_;     // packs whose headers were read again for lost blobs
  std::function<void(const std::string&)> on_warning_;
  std::mutex warn_mutex_;
  std::vector<std::string> warnings_;
  bool catalog_replaced_ = false;
};

std::string snapshot_key(const Id& snapshot);
std::string key_slot_key(const Id& slot);

// Where keel keeps local state: $XDG_DATA_HOME/keel, else
// ~/.local/share/keel, else /var/lib/keel.
std::string default_data_dir();
// The catalog path used when none is given: <data dir>/<repository id>/catalog.db.
std::string default_catalog_path(const Id& repository_id);

}  // namespace keel::engine
