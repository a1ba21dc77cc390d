#include "engine/repository.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>

#include "engine/catalog_copy.h"
#include "engine/condemnation.h"
#include "engine/object_lock.h"
#include "engine/pack.h"
#include "engine/pack_vouch.h"
#include "engine/public_seal.h"
#include "engine/repository_records.h"
#include "engine/sealed_object.h"
#include "targets/retention_guard.h"
#include "util/codec.h"
#include "util/error.h"
#include "util/host.h"

namespace keel::engine {
namespace {

constexpr std::string_view kConfigMagic = "KEELCFG1";
constexpr std::string_view kConfigMagicV2 = "KEELCFG2";  // under the index key
// Catalogs up to this size are verified whole when opened (about 40 ms).
constexpr uintmax_t kVerifiedCatalogBytes = 16ull << 20;
constexpr std::string_view kSnapshotMagic = "KEELSNP1";
constexpr std::string_view kSnapshotMagicV2 = "KEELSNP2";
constexpr std::string_view kConfigKey = "config";
// Associated data for the config box: it has no id of its own.
constexpr std::string_view kConfigAad = "keel config";
// Catalog meta: the change-log keys this catalog has applied, one a line;
// absent until a full sync gave it a starting point.
constexpr std::string_view kLogAppliedMeta = "log_applied";
// Snapshots the last full sync listed but could not read (damaged): a later
// follow need not sync again for them.
constexpr std::string_view kSnapshotsSkippedMeta = "snapshots_skipped";

// The lines of a newline-separated catalog meta value.
std::vector<std::string_view> meta_lines(std::string_view value) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < value.size();) {
    size_t end = std::min(value.find('\n', pos), value.size());
    lines.push_back(value.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

// Set while this thread syncs the catalog: a read inside the sync that finds
// a pack gone must not start another sync.
thread_local bool syncing = false;

struct SyncScope {
  bool outer = !syncing;
  SyncScope() { syncing = true; }
  ~SyncScope() { syncing = !outer; }
};

// When each condemned pack was first condemned, from every record on the
// target that opens; one that does not is named to `warn`.
std::map<Id, int64_t> condemned_packs(targets::Target& target, const Key256& key,
                                      const std::function<void(const std::string&)>& warn) {
  std::map<Id, int64_t> condemned;
  auto skipped = [&](const std::string&, const std::string& why) { warn(ignored_condemnation(why)); };
  for (const Condemnation& record : list_condemnations(target, key, skipped)) {
    for (const Id& pack : record.packs) condemned.emplace(pack, record.condemned_unix);  // earliest first
  }
  return condemned;
}

std::optional<int64_t> condemned_since(const std::map<Id, int64_t>& condemned, const Id& pack) {
  auto it = condemned.find(pack);
  if (it == condemned.end()) return std::nullopt;
  return it->second;
}

// An Object Lock repository's target: every write locked, no locked object removed.
std::unique_ptr<targets::Target> lock_writes(std::unique_ptr<targets::Target> target, const RepoConfig& config) {
  if (!config.object_lock) return target;
  target = targets::make_retention_guard(std::move(target));
  target->set_write_retention(write_retention(*config.object_lock));
  return target;
}

constexpr uint8_t kConfigSectionObjectLock = 1;

Bytes encode_config(const RepoConfig& c) {
  Encoder e;
  e.varint(c.version);
  e.id(c.repository_id);
  e.varint(c.chunker.min_size);
  e.varint(c.chunker.avg_size);
  e.varint(c.chunker.max_size);
  e.svarint(c.compression_level);
  e.varint(c.pack_size);
  e.varint(c.part_size);
  // Optional sections follow, each a tag byte; keel before them refuses a
  // config with bytes left over, so it never writes to (or deletes from) a
  // locked repository it does not understand.
  if (c.object_lock) {
    e.u8(kConfigSectionObjectLock);
    e.u8(static_cast<uint8_t>(c.object_lock->mode));
    e.varint(static_cast<uint64_t>(c.object_lock->period.count()));
  }
  return e.take();
}

RepoConfig decode_config(ByteView body, const std::string& what) {
  Decoder d(body, what);
  RepoConfig c;
  c.version = static_cast<uint32_t>(d.varint());
  if (c.version != 1 && c.version != 2) {
    d.fail("repository format version " + std::to_string(c.version) + " is newer than this keel: upgrade keel");
  }
  c.repository_id = d.id();
  c.chunker.min_size = static_cast<uint32_t>(d.varint());
  c.chunker.avg_size = static_cast<uint32_t>(d.varint());
  c.chunker.max_size = static_cast<uint32_t>(d.varint());
  c.compression_level = static_cast<int>(d.svarint());
  c.pack_size = d.varint();
  c.part_size = d.varint();
  while (!d.done()) {
    const uint8_t section = d.u8();
    if (section != kConfigSectionObjectLock) d.fail("unknown config section " + std::to_string(section) + ": upgrade keel");
    const uint8_t mode = d.u8();
    if (mode != static_cast<uint8_t>(targets::LockMode::kGovernance) &&
        mode != static_cast<uint8_t>(targets::LockMode::kCompliance)) {
      d.fail("unknown Object Lock mode " + std::to_string(mode));
    }
    c.object_lock = ObjectLockConfig{static_cast<targets::LockMode>(mode), std::chrono::seconds(d.varint())};
  }
  d.expect_done();
  return c;
}

// A count, then that many strings (paths, tags).
void encode_strings(Encoder& e, const std::vector<std::string>& strings) {
  e.varint(strings.size());
  for (const auto& x : strings) e.str(x);
}

std::vector<std::string> decode_strings(Decoder& d, const std::string& what) {
  uint64_t n = d.varint();
  if (n > d.remaining()) d.fail(what + " count exceeds the record");
  std::vector<std::string> out;
  for (uint64_t i = 0; i < n; ++i) out.push_back(d.str());
  return out;
}

Bytes encode_snapshot(const catalog::SnapshotRecord& s) {
  Encoder e;
  e.u8(1);
  e.id(s.id);
  e.svarint(s.time_ns);
  e.str(s.host);
  e.str(s.username);
  encode_strings(e, s.paths);
  encode_strings(e, s.tags);
  e.u8(s.parent ? 1 : 0);
  if (s.parent) e.id(*s.parent);
  e.id(s.root);
  const catalog::SnapshotStats& st = s.stats;
  for (uint64_t v : {st.files, st.dirs, st.bytes, st.bytes_read, st.bytes_added, st.chunks_added, st.errors}) e.varint(v);
  e.svarint(st.duration_ms);
  return e.take();
}

catalog::SnapshotRecord decode_snapshot(ByteView body, const std::string& what) {
  Decoder d(body, what);
  if (d.u8() != 1) d.fail("unsupported snapshot version");
  catalog::SnapshotRecord s;
  s.id = d.id();
  s.time_ns = d.svarint();
  s.host = d.str();
  s.username = d.str();
  s.paths = decode_strings(d, "path");
  s.tags = decode_strings(d, "tag");
  if (d.u8()) s.parent = d.id();
  s.root = d.id();
  catalog::SnapshotStats& st = s.stats;
  for (uint64_t* v : {&st.files, &st.dirs, &st.bytes, &st.bytes_read, &st.bytes_added, &st.chunks_added, &st.errors}) {
    *v = d.varint();
  }
  st.duration_ms = d.svarint();
  d.expect_done();
  return s;
}

// Format 2: what a put-only key may read of a snapshot (and what its own
// catalog and forget's policy need): version byte (1), id, time, host,
// tags, parent flag and id.
Bytes encode_snapshot_header(const catalog::SnapshotRecord& s) {
  Encoder e;
  e.u8(1);
  e.id(s.id);
  e.svarint(s.time_ns);
  e.str(s.host);
  encode_strings(e, s.tags);
  e.u8(s.parent ? 1 : 0);
  if (s.parent) e.id(*s.parent);
  return e.take();
}

catalog::SnapshotRecord decode_snapshot_header(ByteView body, const std::string& what) {
  Decoder d(body, what);
  if (d.u8() != 1) d.fail("unsupported snapshot header version");
  catalog::SnapshotRecord s;
  s.id = d.id();
  s.time_ns = d.svarint();
  s.host = d.str();
  s.tags = decode_strings(d, "tag");
  if (d.u8()) s.parent = d.id();
  d.expect_done();
  return s;
}

Bytes seal_snapshot_v2(const MasterKeys& keys, const catalog::SnapshotRecord& s) {
  Encoder e;
  e.raw(as_bytes(kSnapshotMagicV2));
  e.bytes(seal(keys.index, encode_snapshot_header(s), s.id.view()));
  Bytes object = e.take();
  seal_to(keys.sealing.public_key, encode_snapshot(s), s.id.view(), object);
  return object;
}

// The record a format-2 snapshot object holds: all of it for a full key,
// the header alone for a put-only key.
catalog::SnapshotRecord open_snapshot_v2(const MasterKeys& keys, ByteView object, const Id& id, const std::string& what) {
  Decoder d(object.subspan(kSnapshotMagicV2.size()), what);
  ByteView header_box = d.bytes();
  ByteView body_box = d.raw(d.remaining());
  catalog::SnapshotRecord header = decode_snapshot_header(open_sealed(keys.index, header_box, id.view(), what + " header"), what);
  if (!keys.full()) return header;
  catalog::SnapshotRecord full = decode_snapshot(open_sealed_to(keys.sealing, body_box, id.view(), what), what);
  if (full.id != header.id || full.time_ns != header.time_ns || full.host != header.host || full.tags != header.tags ||
      full.parent != header.parent) {
    throw Error(ErrorKind::kIntegrity, what + ": header and record disagree");
  }
  return full;
}

std::string username() {
  const char* u = std::getenv("USER");
  return u ? u : "";
}

}  // namespace

std::string snapshot_key(const Id& snapshot) { return "snapshots/" + snapshot.hex(); }
std::string key_slot_key(const Id& slot) { return "keys/" + slot.hex(); }

std::string default_data_dir() {
  std::string base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    base = std::string(home) + "/.local/share";
  } else {
    base = "/var/lib";
  }
  return base + "/keel";
}

std::string default_catalog_path(const Id& repository_id) {
  return default_data_dir() + "/" + repository_id.hex() + "/catalog.db";
}

Repository::Repository(std::unique_ptr<targets::Target> target, RepoConfig config, MasterKeys keys, Id slot)
    : target_(std::move(target)),
      config_(std::move(config)),
      keys_(keys),
      pack_keys_(std::make_unique<PackKeys>(*target_, keys_)),
      slot_(slot) {}

void Repository::require_full_key(std::string_view command) const {
  if (keys_.full()) return;
  throw Error(ErrorKind::kUsage, std::string(command) + " needs a full key: the password opened a " +
                                     std::string(key_kind_name(keys_.kind)) + " key slot (" + slot_.short_hex() +
                                     "), which can write backups but not read, list or change the repository");
}

void Repository::open_catalog(const std::string& path) {
  catalog_path_ = path.empty() ? default_catalog_path(config_.repository_id) : path;
  try {
    attach_catalog();
  } catch (const catalog::CorruptDatabase& e) {
    replace_damaged_catalog(e);
  }
}

void Repository::attach_catalog() {
  content_.reset();
  catalog_.reset();
  catalog_ = catalog_path_ == kInMemoryCatalog ? catalog::Catalog::open_in_memory() : catalog::Catalog::open(catalog_path_);
  content_ = std::make_unique<Content>(*target_, *pack_keys_, *catalog_);
  content_->on_pack_missing([this](const Id& pack, std::span<const Id> blobs) { recover_missing_pack(pack, blobs); });
  content_->on_bad_copy([this](const std::string& message) { warn(message); });
  std::string repo_id = config_.repository_id.hex();
  std::optional<std::string> known = catalog_->get_meta("repository_id");
  if (known && *known != repo_id) {
    throw Error(ErrorKind::kRepository, "catalog " + catalog_path_ + " belongs to repository " + known->substr(0, 8) +
                                            ", not " + repo_id.substr(0, 8) + " on " + target_->describe());
  }
  if (!known) {
    catalog_->set_meta("repository_id", repo_id);
    catalog_->set_meta("target", target_->describe());
  }
  // A small catalog is read through once: damage anywhere in it is found
  // now, when it can still be rebuilt, not halfway through a command. A
  // large one is not (it would cost every command); damage found later
  // names `keel catalog rebuild`.
  std::error_code ec;
  if (catalog_path_ != kInMemoryCatalog && std::filesystem::file_size(catalog_path_, ec) <= kVerifiedCatalogBytes && !ec) {
    catalog_->verify();
  }
}

void Repository::replace_damaged_catalog(const catalog::CorruptDatabase& damage) {
  if (catalog_path_ == kInMemoryCatalog) throw damage;
  content_.reset();
  catalog_.reset();
  std::string aside = catalog::Catalog::move_aside(catalog_path_);
  warn(std::string(damage.what()) + ": moved aside to " + aside + ", rebuilding from " + target_->describe());
  attach_catalog();
  catalog_replaced_ = true;
}

std::unique_ptr<Repository> Repository::init(std::unique_ptr<targets::Target> target, const RepoConfig& config,
                                             const OpenOptions& options) {
  config.chunker.validate();
  if (options.password.empty()) throw Error(ErrorKind::kUsage, "a repository needs a non-empty password");
  if (target->head(std::string(kConfigKey))) {
    throw Error(ErrorKind::kRepository, target->describe() + " already holds a keel repository");
  }
  RepoConfig c = config;
  c.repository_id = Id::random();
  if (c.version != 1 && c.version != 2) {
    throw Error(ErrorKind::kUsage, "unknown repository format " + std::to_string(c.version) + " (1 or 2)");
  }
  if (c.object_lock) {
    if (c.object_lock->period.count() <= 0) throw Error(ErrorKind::kUsage, "an Object Lock period must be positive");
    if (!target->object_lock_enabled()) {
      throw Error(ErrorKind::kUsage,
                  target->describe() + " has no Object Lock: keel can lock objects only in an S3 bucket created "
                                       "with Object Lock enabled (aws s3api create-bucket --bucket NAME "
                                       "--object-lock-enabled-for-bucket, i.e. CreateBucket with "
                                       "x-amz-bucket-object-lock-enabled: true; a local directory cannot lock)");
    }
  }
  target = lock_writes(std::move(target), c);
  MasterKeys keys = MasterKeys::generate(c.version);
  KeySlotInfo slot{Id::random(), static_cast<int64_t>(std::time(nullptr)), local_hostname(), username()};
  // Key slot first: a config without a slot would be a repository nobody can open.
  target->put(key_slot_key(slot.id), seal_key_slot(keys, slot, options.password));
  write_config(*target, c, keys);

  std::unique_ptr<Repository> repo(new Repository(std::move(target), c, keys, slot.id));
  repo->on_warning_ = options.on_warning;
  repo->open_catalog(options.catalog_path);
  return repo;
}

void write_config(targets::Target& target, const RepoConfig& config, const MasterKeys& keys) {
  target.put(std::string(kConfigKey), seal_object(config.version >= 2 ? kConfigMagicV2 : kConfigMagic, keys.index,
                                                  encode_config(config), as_bytes(kConfigAad)));
}

RepoConfig read_config(targets::Target& target, MasterKeys& keys) {
  Bytes cfg = target.get(std::string(kConfigKey));
  std::string what = target.describe() + "/config";
  const bool v2 = cfg.size() >= kConfigMagicV2.size() && as_chars(ByteView(cfg).first(kConfigMagicV2.size())) == kConfigMagicV2;
  if (v2 && keys.format < 2 && keys.full()) {
    // A format-1 slot of a repository migrated to format 2: the rest of its keys are in keys-v2.
    const std::string migrated = target.describe() + "/" + std::string(kMigratedKeysKey);
    Bytes object;
    try {
      object = target.get(std::string(kMigratedKeysKey));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNotFound) throw;
      throw Error(ErrorKind::kIntegrity, what + ": the repository was migrated to format 2, but " + migrated +
                                             ", which the format-1 key slots need, is missing (bring it back with "
                                             "keel repair --undelete, or open with a password added since)");
    }
    keys = open_migrated_keys(keys, object, migrated);
  }
  if (v2 != (keys.format >= 2)) {
    throw Error(ErrorKind::kIntegrity, what + ": the key slot is of format " + std::to_string(keys.format) +
                                           ", the config is not");
  }
  Bytes body = open_object(v2 ? kConfigMagicV2 : kConfigMagic, "repository config", keys.index, cfg,
                           as_bytes(kConfigAad), what);
  RepoConfig config = decode_config(body, what);
  if ((config.version >= 2) != v2) {
    throw Error(ErrorKind::kIntegrity, what + ": format " + std::to_string(config.version) + " in a " +
                                           (v2 ? "KEELCFG2" : "KEELCFG1") + " object");
  }
  return config;
}

std::unique_ptr<Repository> Repository::open(std::unique_ptr<targets::Target> target, const OpenOptions& options) {
  std::string where = target->describe();
  if (!target->head(std::string(kConfigKey))) {
    throw Error(ErrorKind::kRepository, where + ": no keel repository here (run keel init first)");
  }
  std::vector<std::string> slots;
  target->list("keys/", [&](const targets::ObjectInfo& o) { slots.push_back(o.key); });
  std::sort(slots.begin(), slots.end());
  std::optional<MasterKeys> keys;
  Id slot_id;
  std::vector<std::string> damaged;  // a damaged slot is reported, not taken for a wrong password
  for (const std::string& key : slots) {
    try {
      keys = open_key_slot(target->get(key), options.password, where + "/" + key);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      damaged.push_back(e.what());
      continue;
    }
    if (keys) {
      slot_id = read_key_slot_info(target->get(key), key).id;
      break;
    }
  }
  if (!keys && !damaged.empty()) {
    std::string list;
    for (const std::string& d : damaged) list += (list.empty() ? "" : "; ") + d;
    throw Error(ErrorKind::kIntegrity, where + ": no intact key slot opens with the password (" +
                                           std::to_string(slots.size() - damaged.size()) + " of " +
                                           std::to_string(slots.size()) + " intact); " + list);
  }
  if (!keys) {
    throw Error(ErrorKind::kWrongPassword,
                where + ": wrong password (none of its " + std::to_string(slots.size()) + " key slots opens with it)");
  }
  RepoConfig config = read_config(*target, *keys);  // a migrated repository's format-1 slot gets the rest of its keys
  target = lock_writes(std::move(target), config);

  std::unique_ptr<Repository> repo(new Repository(std::move(target), config, *keys, slot_id));
  repo->on_warning_ = options.on_warning;
  repo->open_catalog(options.catalog_path);
  // The first reads of the catalog: where a damaged file usually shows.
  try {
    repo->follow_log();
  } catch (const catalog::CorruptDatabase& e) {
    repo->replace_damaged_catalog(e);
    repo->follow_log();
  }
  repo->judge_packs();
  // History exists only in catalogs: a replaced one takes it from a copy.
  if (repo->catalog_replaced_) import_newest_history(*repo);
  return repo;
}

std::optional<Tree> Repository::cached_tree(const Id& id) {
  std::optional<Bytes> body = catalog_->get_tree(id);
  if (!body) return std::nullopt;
  return Tree::decode(*body, "tree " + id.short_hex());
}

Tree Repository::load_tree(const Id& id) {
  if (std::optional<Tree> tree = cached_tree(id)) return *tree;
  Bytes body = read_blob(id);  // verified against its id (content.h): a false copy would stop prune's marking
  Tree tree = Tree::decode(body, "tree " + id.short_hex());
  catalog_->put_tree(id, body);
  return tree;
}

void Repository::save_snapshot(const catalog::SnapshotRecord& snapshot, std::vector<LoggedPack> packs) {
  target_->put(snapshot_key(snapshot.id),
               keys_.format >= 2 ? seal_snapshot_v2(keys_, snapshot)
                                 : seal_object(kSnapshotMagic, keys_.data, encode_snapshot(snapshot), snapshot.id.view()));
  catalog_->add_snapshot(snapshot);
  // Packs a killed run of this host left unlogged, which this snapshot may
  // reuse: without them in the log, other hosts would find its chunks only
  // by a full sync.
  std::set<Id> named;
  for (const LoggedPack& p : packs) named.insert(p.pack.id);
  for (catalog::PackRecord& left : catalog_->unlogged_packs()) {
    if (named.count(left.id)) continue;
    std::vector<catalog::BlobRecord> blobs = catalog_->blobs_in_pack(left.id);
    catalog::PackRecord record{left.id, left.size, {}, left.created_unix, {}};
    record.vouched = left.vouched;
    packs.push_back(LoggedPack{std::move(record), std::move(blobs), std::nullopt});
  }
  ChangeLogEntry entry;
  entry.packs_added = std::move(packs);
  entry.snapshots_added.push_back(snapshot.id);
  log_changes(entry);
}

catalog::SnapshotRecord Repository::find_snapshot(std::string_view spec) {
  std::vector<catalog::SnapshotRecord> all = catalog_->list_snapshots();
  if (spec == "latest") {
    if (all.empty()) throw Error(ErrorKind::kNotFound, target_->describe() + " has no snapshots yet");
    return all.back();
  }
  if (spec.size() < 4) throw Error(ErrorKind::kUsage, "snapshot id '" + std::string(spec) + "' is too short (4+ digits)");
  std::vector<catalog::SnapshotRecord> hits;
  for (auto& s : all) {
    if (s.id.hex().compare(0, spec.size(), spec) == 0) hits.push_back(s);
  }
  if (hits.empty()) throw Error(ErrorKind::kNotFound, "no snapshot " + std::string(spec) + " in " + target_->describe());
  if (hits.size() > 1) throw Error(ErrorKind::kUsage, "snapshot id " + std::string(spec) + " is ambiguous");
  return hits.front();
}

void Repository::cache_trees_from(const Id& root) {
  std::vector<Id> stack{root};
  std::set<Id> seen;
  while (!stack.empty()) {
    Id id = stack.back();
    stack.pop_back();
    if (!seen.insert(id).second) continue;
    Tree tree;
    try {
      tree = load_tree(id);
    } catch (const Error& e) {
      // Caching is a head start only: a lost or damaged tree is reported by
      // whatever walks it (a restore fails that directory alone, check names it).
      if (e.kind() != ErrorKind::kNotFound && e.kind() != ErrorKind::kIntegrity) throw;
      continue;
    }
    for (const TreeEntry& e : tree.entries) {
      if (e.meta.type == NodeType::kDir) stack.push_back(e.subtree);
    }
  }
}

size_t Repository::sync_catalog() {
  SyncScope scope;
  // The log first: each entry listed now names objects that were on the
  // target before it, so the full listing below covers them all.
  std::vector<std::string> log = list_log_keys(*target_);
  size_t added = sync_with_listing();
  remember_log(log);
  return added;
}

size_t Repository::sync_with_listing() {
  // Only what the catalog held before looking may be dropped as gone: every
  // object is on the target before any catalog has it, and another process
  // may add to this catalog meanwhile.
  std::map<Id, std::optional<int64_t>> known_packs;
  for (const catalog::PackRecord& p : catalog_->list_packs()) known_packs[p.id] = p.condemned_unix;

  // Snapshots, then packs, then condemnations: a snapshot is written after
  // its packs, and a repack condemns the old packs before it writes the new
  // ones, so each listing shows what the earlier ones depend on.
  const SnapshotListing snapshots = list_snapshots_dropping_gone();
  std::map<Id, uint64_t> packs_on_target;
  target_->list("packs/", [&](const targets::ObjectInfo& o) {
    if (std::optional<Id> id = id_from_key(o.key)) packs_on_target[*id] = o.size;
  });
  std::map<Id, int64_t> condemned = condemned_packs(*target_, keys_.index, [this](const std::string& m) { warn(m); });

  // Deleted packs (prune) leave the catalog.
  for (const auto& [id, since] : known_packs) {
    if (!packs_on_target.count(id)) {
      catalog_->remove_pack(id);
    } else if (since != condemned_since(condemned, id)) {
      catalog_->set_condemned(id, condemned_since(condemned, id));
    }
  }

  // New packs: after the condemnations, so blobs they hold move out of condemned packs.
  size_t added = 0;
  for (const auto& [id, size] : packs_on_target) {
    if (known_packs.count(id)) continue;
    std::optional<PackHeader> header = read_pack_header_or_warn(id, size);
    if (!header) continue;  // damaged (warned)
    // The whole-pack checksum is unknown until the pack is read in full;
    // blob checksums (from the authenticated header) still guard every byte.
    catalog::PackRecord record{id, size, {}, static_cast<int64_t>(std::time(nullptr)), condemned_since(condemned, id)};
    record.vouched = header->vouched;
    index_pack(record, header->blobs);
    ++added;
  }

  std::string skipped;
  for (const Id& id : snapshots.listed) {
    if (snapshots.known_before.count(id)) continue;
    std::optional<catalog::SnapshotRecord> snap = read_snapshot_or_warn(id);
    if (!snap) {  // forgotten meanwhile, or damaged (warned)
      skipped += (skipped.empty() ? "" : "\n") + id.hex();
      continue;
    }
    cache_trees_or_warn(*snap);
    catalog_->add_snapshot(*snap);
  }
  catalog_->set_meta(kSnapshotsSkippedMeta, skipped);
  return added;
}

Repository::SnapshotListing Repository::list_snapshots_dropping_gone() {
  SnapshotListing out;
  for (const catalog::SnapshotRecord& s : catalog_->list_snapshots()) out.known_before.insert(s.id);
  for (const Id& id : list_object_ids(*target_, "snapshots/")) out.listed.insert(id);
  for (const Id& id : out.known_before) {
    if (!out.listed.count(id)) catalog_->remove_snapshot(id);
  }
  return out;
}

void Repository::follow_log() {
  SyncScope scope;
  std::vector<std::string> listed = list_log_keys(*target_);
  std::optional<std::string> state = catalog_->get_meta(kLogAppliedMeta);
  auto full_sync = [&] {
    sync_with_listing();
    remember_log(listed);
  };
  if (!state) return full_sync();  // never followed the log: no starting point
  std::set<std::string> applied;
  for (std::string_view key : meta_lines(*state)) applied.emplace(key);
  std::set<std::string> present(listed.begin(), listed.end());
  std::vector<ChangeLogEntry> fresh;
  for (const std::string& key : listed) {
    if (applied.count(key)) continue;
    std::optional<ChangeLogEntry> entry;
    try {
      entry = read_log_entry(*target_, keys_.index, key);
    } catch (const Error& e) {
      // Sealed under another key (written before the repository was
      // migrated to format 2) or damaged: the listing tells what it would have.
      if (e.kind() != ErrorKind::kIntegrity) throw;
      return full_sync();
    }
    if (!entry) return full_sync();  // compacted since it was listed
    for (const std::string& gone : entry->entries_compacted) {
      // A compaction removed an entry this catalog never applied.
      if (!applied.count(gone) && !present.count(gone)) return full_sync();
    }
    fresh.push_back(std::move(*entry));
  }
  // Listed after log/: it shows every removal the entries claim (forget
  // and prune log a removal after it), and those no entry names yet (a
  // forget killed before its entry, an object deleted by hand), which
  // would otherwise stay in this catalog until a full sync.
  const SnapshotListing snapshots = list_snapshots_dropping_gone();
  // A snapshot listed that no entry names and this catalog never held was
  // written by a backup killed before its entry (or one still writing it):
  // its packs are unlogged too, so only the full listing brings it in.
  std::set<Id> explained = snapshots.known_before;
  for (const ChangeLogEntry& e : fresh) explained.insert(e.snapshots_added.begin(), e.snapshots_added.end());
  const std::string skipped = catalog_->get_meta(kSnapshotsSkippedMeta).value_or("");
  for (std::string_view hex : meta_lines(skipped)) explained.insert(Id::from_hex(hex));
  for (const Id& id : snapshots.listed) {
    if (!explained.count(id)) return full_sync();
  }
  if (!fresh.empty()) apply_log(fresh, snapshots);
  if (!fresh.empty() || applied.size() != listed.size()) remember_log(listed);
}

void Repository::apply_log(const std::vector<ChangeLogEntry>& entries, const SnapshotListing& snapshots) {
  // Ids are never reused, so the entries apply as sets, in any order:
  // removals win over additions, and a pack removed drops its blobs before
  // the packs added (or the relocations) index them again.
  std::set<Id> packs_removed, snapshots_removed;
  bool packs_added = false, condemnations_changed = false;
  for (const ChangeLogEntry& e : entries) {
    packs_removed.insert(e.packs_removed.begin(), e.packs_removed.end());
    snapshots_removed.insert(e.snapshots_removed.begin(), e.snapshots_removed.end());
    packs_added = packs_added || !e.packs_added.empty();
    condemnations_changed = condemnations_changed || e.condemnations_changed;
  }
  std::vector<Id> packs_claimed;
  for (const Id& pack : packs_removed) {
    if (catalog_->has_pack(pack)) packs_claimed.push_back(pack);
  }
  for (const Id& pack : removed_from_target("packs/", packs_claimed, pack_key)) catalog_->remove_pack(pack);
  // A pack added may have been condemned since (and new copies of blobs
  // move out of condemned packs), so condemnations are read before adding.
  std::map<Id, int64_t> condemned;
  if (packs_added || condemnations_changed) {
    condemned = condemned_packs(*target_, keys_.index, [this](const std::string& m) { warn(m); });
    for (const catalog::PackRecord& p : catalog_->list_packs()) {
      if (p.condemned_unix != condemned_since(condemned, p.id)) catalog_->set_condemned(p.id, condemned_since(condemned, p.id));
    }
  }
  for (const ChangeLogEntry& e : entries) {
    for (const LoggedPack& p : e.packs_added) {
      if (packs_removed.count(p.pack.id)) continue;
      catalog::PackRecord record = p.pack;
      record.condemned_unix = condemned_since(condemned, record.id);
      record.vouched = pack_vouched(keys_, record.id, p.blobs, p.vouch);
      index_pack(record, p.blobs);
    }
  }
  // A full key of format 2 takes only the relocations a full key vouched
  // for: a forged one could otherwise place a blob in a vouched pack. A
  // relocation left out costs a read of the pack's header if the blob is
  // ever read (recover_missing_pack), or a new copy if a backup meets it.
  std::map<Id, catalog::PackRecord> known;
  for (const ChangeLogEntry& e : entries) {
    for (const LoggedRelocation& r : e.relocated) {
      const catalog::BlobLocation& loc = r.location;
      if (catalog_->find_blob(loc.blob.id)) continue;
      const std::span<const catalog::BlobRecord> blob(&loc.blob, 1);
      if (keys_.format >= 2 && keys_.full() && !pack_vouched(keys_, loc.pack, blob, r.vouch)) continue;
      if (known.empty()) {
        for (catalog::PackRecord& p : catalog_->list_packs()) known.emplace(p.id, std::move(p));
      }
      auto it = known.find(loc.pack);
      if (it != known.end()) catalog_->add_pack(it->second, blob);
    }
  }
  // The listing dropped the snapshots removed already; those the entries
  // claim removed that it still shows stay (with a warning).
  std::vector<Id> snapshots_claimed;
  for (const Id& id : snapshots_removed) {
    if (snapshots.known_before.count(id)) snapshots_claimed.push_back(id);
  }
  for (const Id& id : removed_from_target("snapshots/", snapshots_claimed, snapshot_key, &snapshots.listed)) {
    catalog_->remove_snapshot(id);
  }
  std::set<Id> snapshots_known;
  for (const catalog::SnapshotRecord& s : catalog_->list_snapshots()) snapshots_known.insert(s.id);
  for (const ChangeLogEntry& e : entries) {
    for (const Id& id : e.snapshots_added) {
      if (snapshots_removed.count(id) || !snapshots_known.insert(id).second) continue;
      if (std::optional<catalog::SnapshotRecord> snap = read_snapshot_or_warn(id)) {
        cache_trees_or_warn(*snap);
        catalog_->add_snapshot(*snap);
      }
    }
  }
}

std::vector<Id> Repository::removed_from_target(std::string_view prefix, const std::vector<Id>& claimed,
                                                std::string (*key_of)(const Id&), const std::set<Id>* listed) {
  if (claimed.empty()) return {};
  std::set<Id> present;
  if (listed) {
    for (const Id& id : claimed) {
      if (listed->count(id)) present.insert(id);
    }
  } else if (claimed.size() <= kHeadsBeforeListing) {
    for (const Id& id : claimed) {
      if (target_->head(key_of(id))) present.insert(id);
    }
  } else {
    const std::set<Id> wanted(claimed.begin(), claimed.end());
    for (const Id& id : list_object_ids(*target_, prefix)) {
      if (wanted.count(id)) present.insert(id);
    }
  }
  std::vector<Id> removed;
  for (const Id& id : claimed) {
    if (!present.count(id)) {
      removed.push_back(id);
      continue;
    }
    warn("a change-log entry says " + key_of(id) + " was removed, but it is still on " + target_->describe() +
         ": kept (an entry sealed by a put-only or stolen key, or a removal that did not take); keel check");
  }
  return removed;
}

void Repository::remember_log(const std::vector<std::string>& keys) {
  std::string state;
  for (const std::string& key : keys) state += (state.empty() ? "" : "\n") + key;
  catalog_->set_meta(kLogAppliedMeta, state);
}

void Repository::log_changes(const ChangeLogEntry& changes) {
  if (changes.empty()) return;
  // Vouch for what a full key's writers wrote (pack_vouch.h): the packs of
  // this process and this host's unlogged ones are vouched for in the
  // catalog when a full key wrote them, a relocation when its pack is.
  ChangeLogEntry vouched = changes;
  for (LoggedPack& p : vouched.packs_added) {
    if (p.pack.vouched) p.vouch = pack_vouch(keys_, p.pack.id, p.blobs);
  }
  for (LoggedRelocation& r : vouched.relocated) {
    std::optional<catalog::PackRecord> pack = catalog_->find_pack(r.location.pack);
    if (pack && pack->vouched) r.vouch = pack_vouch(keys_, r.location.pack, std::span(&r.location.blob, 1));
  }
  std::string key = put_log_entry(*target_, keys_.index, vouched);
  std::vector<Id> logged;
  for (const LoggedPack& p : changes.packs_added) logged.push_back(p.pack.id);
  catalog_->mark_logged(logged);
  // This catalog holds the changes already; other entries it has not seen
  // stay unapplied until the next sync.
  if (std::optional<std::string> state = catalog_->get_meta(kLogAppliedMeta)) {
    catalog_->set_meta(kLogAppliedMeta, state->empty() ? key : *state + "\n" + key);
  }
}

void Repository::recover_missing_pack(const Id& pack, std::span<const Id> blobs) {
  if (syncing) return;  // the sync under way brings the catalog up to date
  std::lock_guard lock(recover_mutex_);
  if (recovered_packs_.insert(pack).second) {
    follow_log();
    if (catalog_->has_pack(pack)) sync_catalog();  // the log did not say: the full listing will
  }
  // Blobs indexed only in the gone pack may also be in packs this catalog
  // knows (stored twice by concurrent backups, whose first copy it kept):
  // their headers say. Each header is read once per process.
  std::set<Id> lost;
  for (const Id& blob : blobs) {
    if (!catalog_->find_blob(blob)) lost.insert(blob);
  }
  if (lost.empty()) return;
  for (const catalog::PackRecord& p : catalog_->list_packs()) {
    if (!reread_packs_.insert(p.id).second) continue;
    PackHeader header;
    try {
      header = read_pack_header(*target_, keys_, p.id, p.size);
    } catch (const Error&) {
      continue;  // damaged or gone too: check reports it
    }
    bool holds = false;
    for (const catalog::BlobRecord& b : header.blobs) holds = lost.erase(b.id) > 0 || holds;
    if (holds) {
      catalog::PackRecord record = p;
      record.vouched = header.vouched;
      index_pack(record, header.blobs);
    }
    if (lost.empty()) return;
  }
}

std::optional<catalog::SnapshotRecord> Repository::read_snapshot(const Id& id) {
  return read_snapshot_object(*target_, keys_, id);
}

std::optional<catalog::SnapshotRecord> read_snapshot_object(targets::Target& target, const MasterKeys& keys,
                                                            const Id& id) {
  std::string what = target.describe() + "/" + snapshot_key(id);
  catalog::SnapshotRecord snap;
  if (keys.format >= 2) {
    Bytes object;
    try {
      object = target.get(snapshot_key(id));
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kNotFound) return std::nullopt;
      throw;
    }
    const auto starts_with = [&](std::string_view magic) {
      return object.size() >= magic.size() && as_chars(ByteView(object).first(magic.size())) == magic;
    };
    if (starts_with(kSnapshotMagicV2)) {
      snap = open_snapshot_v2(keys, object, id, what);
    } else if (starts_with(kSnapshotMagic)) {
      // Written before the repository was migrated from format 1: all of it
      // under the data key, which a put-only key lacks.
      if (!keys.full()) return std::nullopt;
      snap = decode_snapshot(open_object(kSnapshotMagic, "snapshot", keys.data, object, id.view(), what), what);
    } else {
      throw Error(ErrorKind::kIntegrity, what + ": not a keel snapshot");
    }
  } else {
    std::optional<Bytes> body = read_object(target, snapshot_key(id), kSnapshotMagic, "snapshot", keys.data, id.view(), what);
    if (!body) return std::nullopt;
    snap = decode_snapshot(*body, what);
  }
  if (snap.id != id) throw Error(ErrorKind::kIntegrity, what + ": record names another snapshot");
  return snap;
}

// A pack whose header does not authenticate is left out of the index (its
// blobs are read from other copies, if any) instead of failing the sync.
void Repository::index_pack(catalog::PackRecord pack, std::span<const catalog::BlobRecord> blobs) {
  pack.judged = keys_.format < 2 || keys_.full();
  if (std::optional<catalog::PackRecord> known = catalog_->find_pack(pack.id)) {
    if (known->vouched || !pack.vouched) return;
    catalog_->remove_pack(pack.id);
  }
  catalog_->add_pack(pack, blobs);
}

void Repository::judge_packs() {
  if (keys_.format < 2 || !keys_.full()) return;
  for (catalog::PackRecord& pack : catalog_->list_packs()) {
    if (pack.judged) continue;
    std::optional<PackHeader> header = read_pack_header_or_warn(pack.id, pack.size);
    if (!header) continue;  // damaged (warned): it stays unjudged, and not vouched
    pack.judged = true;
    if (header->vouched) {
      pack.vouched = true;
      index_pack(pack, header->blobs);  // its records afresh: a put-only key may have taken them from a forged entry
    } else {
      catalog_->add_pack(pack, header->blobs);  // refreshed in place: cached trees of a put-only host's packs stay
    }
  }
}

std::optional<PackHeader> Repository::read_pack_header_or_warn(const Id& pack, uint64_t size) {
  try {
    return read_pack_header(*target_, keys_, pack, size);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity) throw;
    warn("pack " + pack.hex() + " is damaged and was not indexed (" + e.what() + "); run keel check, then keel repair");
    return std::nullopt;
  }
}

// One damaged snapshot must not stop every command: the others are served.
std::optional<catalog::SnapshotRecord> Repository::read_snapshot_or_warn(const Id& id) {
  try {
    return read_snapshot(id);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity) throw;
    warn("snapshot " + id.hex() + " is damaged and was skipped (" + e.what() +
         "); run keel check, then keel repair to move it aside");
    return std::nullopt;
  }
}

// A snapshot whose trees cannot all be read is still listed: files under
// the trees that can be read still restore.
void Repository::cache_trees_or_warn(const catalog::SnapshotRecord& snapshot) {
  if (!keys_.full()) return;  // trees are closed to put-only keys
  try {
    cache_trees_from(snapshot.root);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity && e.kind() != ErrorKind::kNotFound) throw;
    warn("snapshot " + snapshot.id.hex() + ": a directory listing cannot be read (" + e.what() +
         "); run keel check");
  }
}

void Repository::warn(const std::string& message) {
  std::lock_guard lock(warn_mutex_);  // reader threads warn of copies they read around
  warnings_.push_back(message);
  if (on_warning_) on_warning_(message);
}

void Repository::rebuild_catalog() {
  // A rebuild never fails for a damaged catalog: that is what it is for.
  try {
    catalog_->clear_index();
    catalog_->verify();
    sync_catalog();
  } catch (const catalog::CorruptDatabase& e) {
    replace_damaged_catalog(e);
    sync_catalog();
  }
}

std::vector<KeySlotInfo> Repository::list_key_slots() {
  std::vector<KeySlotInfo> out;
  std::vector<std::string> keys;
  target_->list("keys/", [&](const targets::ObjectInfo& o) { keys.push_back(o.key); });
  for (const std::string& key : keys) {
    try {
      out.push_back(read_key_slot_info(target_->get(key), target_->describe() + "/" + key));
    } catch (const Error& e) {
      // Damaged, or garbage from credentials that may create objects: it
      // opens nothing, and must not hide the slots that do.
      if (e.kind() != ErrorKind::kIntegrity) throw;
      warn(std::string(e.what()) + ": skipped; keel check reports it, keel repair moves it aside");
    }
  }
  std::sort(out.begin(), out.end(), [](const KeySlotInfo& a, const KeySlotInfo& b) {
    return std::tie(a.created_unix, a.id) < std::tie(b.created_unix, b.id);
  });
  return out;
}

KeySlotInfo Repository::add_key_slot(std::string_view password, KeyKind kind) {
  require_full_key("key add");
  if (password.empty()) throw Error(ErrorKind::kUsage, "a key slot needs a non-empty password");
  if (kind == KeyKind::kPutOnly && keys_.format < 2) {
    throw Error(ErrorKind::kUsage, target_->describe() + " is a format-1 repository: put-only keys need format 2; "
                                   "migrate it first with keel migrate --format 2 (docs/repository-format.md)");
  }
  KeySlotInfo slot{Id::random(), static_cast<int64_t>(std::time(nullptr)), local_hostname(), username(), kind};
  target_->put(key_slot_key(slot.id), seal_key_slot(kind == KeyKind::kPutOnly ? keys_.put_only() : keys_, slot, password));
  return slot;
}

void Repository::remove_key_slot(const Id& slot) {
  std::vector<KeySlotInfo> slots = list_key_slots();
  bool exists = std::any_of(slots.begin(), slots.end(), [&](const KeySlotInfo& s) { return s.id == slot; });
  if (!exists) throw Error(ErrorKind::kNotFound, "no key slot " + slot.short_hex() + " in " + target_->describe());
  if (slot == slot_) {
    throw Error(ErrorKind::kUsage, "key slot " + slot.short_hex() + " is the one in use; open with another password to remove it");
  }
  if (slots.size() == 1) throw Error(ErrorKind::kUsage, "refusing to remove the last key slot");
  target_->remove(key_slot_key(slot));
}

}  // namespace keel::engine
