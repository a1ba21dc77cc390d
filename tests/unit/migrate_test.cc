// keel migrate --format 2 (engine/migrate.h): a format-1 repository becomes
// format 2 without its packs, trees or snapshots rewritten; full keys read
// old and new data, a put-only key indexes the old packs and dedupes against
// them. A migration stopped dead after any write (every write from then on
// failing, as for a process killed with SIGKILL) leaves a repository that is
// format 1 or format 2 and works, and a rerun completes it.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/check.h"
#include "engine/forget.h"
#include "engine/keys.h"
#include "engine/migrate.h"
#include "engine/pack.h"
#include "engine/prune.h"
#include "engine/restore.h"
#include "targets/memory/memory_target.h"
#include "targets/target_decorator.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;
namespace fs = std::filesystem;

namespace {

constexpr const char* kPassword = "format one";
constexpr const char* kPutPassword = "put only";

using Files = std::map<std::string, Bytes>;

Files read_tree(const fs::path& root) {
  Files out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    out[fs::relative(e.path(), root).string()] = Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return out;
}

// A process that dies after `writes` writes: every call after that fails,
// so nothing it would do next (a lease removed on the way out) happens.
class DyingTarget : public targets::TargetDecorator {
 public:
  DyingTarget(std::unique_ptr<targets::Target> inner, uint64_t writes)
      : TargetDecorator(std::move(inner)), left_(writes) {}
  void put(const std::string& key, ByteView data) override {
    write(key);
    inner().put(key, data);
  }
  void remove(const std::string& key) override {
    write(key);
    inner().remove(key);
  }
  std::unique_ptr<targets::Upload> start_upload(const std::string& key) override {
    write(key);
    return inner().start_upload(key);
  }
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    alive(key);
    return inner().get_range(key, offset, out);
  }
  std::optional<targets::ObjectInfo> head(const std::string& key) override {
    alive(key);
    return inner().head(key);
  }
  void list(const std::string& prefix, const std::function<void(const targets::ObjectInfo&)>& fn) override {
    alive(prefix);
    inner().list(prefix, fn);
  }
  uint64_t writes_done() const { return done_; }
  void arm(uint64_t writes) { left_ = writes; }

 private:
  void alive(const std::string& key) const {
    if (left_ == 0) throw Error(ErrorKind::kTargetIo, "killed before " + key);
  }
  void write(const std::string& key) {  // packs are indexed on several threads
    uint64_t left = left_.load();
    do {
      if (left == 0) throw Error(ErrorKind::kTargetIo, "killed before " + key);
    } while (!left_.compare_exchange_weak(left, left - 1));
    ++done_;
  }
  std::atomic<uint64_t> left_;
  std::atomic<uint64_t> done_{0};
};

// A format-1 repository in memory with two snapshots in small packs, and a
// condemnation record left by a prune (a third snapshot forgotten).
struct World {
  test::TempDir dir{"keel-migrate"};
  std::shared_ptr<targets::memory::MemoryStore> store = std::make_shared<targets::memory::MemoryStore>();
  std::map<Id, Files> snapshots;  // what each holds
  int catalogs = 0;

  World() {
    RepoConfig config;
    config.chunker = {1024, 4096, 16384};
    config.pack_size = 32 << 10;
    config.part_size = 16 << 10;
    auto repo = Repository::init(open(), config, {kPassword, catalog()});
    cheapen_key_slots(repo->keys());
    write_source("a", 1);
    write_source("b", 2);
    write_source("c", 3);
    backup(*repo, "a");
    backup(*repo, "b");
    catalog::SnapshotRecord c = backup(*repo, "c");
    snapshots.erase(c.id);
    forget_snapshots(*repo, {c.id.hex()}, false);
    PruneResult pruned = prune(*repo, {});
    REQUIRE(pruned.packs_condemned > 0);
  }

  std::unique_ptr<targets::Target> open() { return targets::memory::open_memory_target(store); }
  std::string catalog() { return dir.file("catalog-" + std::to_string(++catalogs) + ".db"); }
  std::unique_ptr<Repository> open_repo(const char* password = kPassword) {
    return Repository::open(open(), {password, catalog()});
  }

  // Slots sealed with cheap scrypt: the sweep below opens the repository often.
  void cheapen_key_slots(const MasterKeys& keys) {
    auto objects = store->objects();
    for (auto& [key, data] : objects) {
      if (key.rfind("keys/", 0) == 0) data = seal_key_slot(keys, read_key_slot_info(data, key), kPassword, {.n = 2, .r = 1, .p = 1});
    }
    store->set_objects(std::move(objects));
  }

  fs::path src(const std::string& name) const { return dir.path / "src" / name; }
  void write_source(const std::string& name, uint64_t seed) {
    for (int i = 0; i < 4; ++i) {
      fs::create_directories(src(name));
      const Bytes data = test::random_bytes(12000 + 9000 * i, seed * 10 + i);
      std::ofstream(src(name) / ("f" + std::to_string(i)), std::ios::binary)
          .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    }
  }

  catalog::SnapshotRecord backup(Repository& repo, const std::string& name) {
    auto source = agents::fs::make_fs_source({src(name).string()}, {});
    BackupProgress progress;
    BackupResult result = run_backup(repo, *source, BackupOptions{}, progress);
    REQUIRE(result.skipped.empty());
    snapshots[result.snapshot.id] = read_tree(src(name));
    return result.snapshot;
  }

  size_t count(const std::string& prefix) const {
    size_t n = 0;
    for (const auto& [key, data] : store->objects()) n += key.rfind(prefix, 0) == 0;
    return n;
  }

  // Every snapshot restores byte for byte with the password given, and
  // check --read-data is clean; returns the format found.
  uint32_t check_works(const char* password = kPassword) {
    auto repo = open_repo(password);
    int n = 0;
    for (const auto& [id, files] : snapshots) {
      INFO("snapshot " << id.short_hex());
      catalog::SnapshotRecord snapshot = repo->find_snapshot(id.hex());
      test::TempDir out{"keel-migrate-out"};
      RestoreOptions options;
      options.target_dir = (out.path / std::to_string(++n)).string();
      options.subpath = snapshot.paths.front();
      RestoreProgress progress;
      RestoreResult r = run_restore(*repo, snapshot, options, progress);
      CHECK(r.failures.empty());
      CHECK(read_tree(out.path / std::to_string(n)) == files);
    }
    CheckResult check = run_check(*repo, {.read_data = true});
    for (const auto& p : check.problems) FAIL_CHECK("check: " << p.message);
    return repo->config().version;
  }

  // A put-only key backs up source `name` again: it indexes every pack
  // (the old ones through their pack indexes) and uploads no chunk.
  void put_only_backup_dedupes(const std::string& name) {
    auto full = open_repo();
    full->add_key_slot(kPutPassword, KeyKind::kPutOnly);
    auto put = open_repo(kPutPassword);
    REQUIRE(put->put_only());
    CHECK(put->warnings().empty());
    CHECK(put->catalog().list_packs().size() == count("packs/"));
    catalog::SnapshotRecord snapshot = backup(*put, name);
    CHECK(snapshot.stats.chunks_added == 0);
  }
};

}  // namespace

TEST_CASE("migrate makes a format-1 repository format 2 without rewriting its data", "[migrate]") {
  World w;
  const size_t packs = w.count("packs/");
  const auto before = w.store->objects();
  REQUIRE(w.count("condemned/") == 1);
  MigrateResult result;
  {
    auto repo = w.open_repo();
    result = migrate_to_format2(*repo);
  }
  CHECK(result.format_before == 1);
  CHECK(result.switched);
  CHECK(result.keys_written);
  CHECK(result.packs == packs);
  CHECK(result.packs_indexed == packs);
  CHECK(result.condemnations_removed == 1);
  CHECK(result.not_indexed.empty());
  // Packs and snapshots untouched; a pack index each; no lock left.
  const auto after = w.store->objects();
  for (const auto& [key, data] : before) {
    if (key.rfind("packs/", 0) == 0 || key.rfind("snapshots/", 0) == 0 || key.rfind("keys/", 0) == 0) {
      CHECK(after.at(key) == data);
    }
  }
  CHECK(w.count("pack-index/") == packs);
  CHECK(w.count("locks/") == 0);
  CHECK(w.count("condemned/") == 0);
  CHECK(w.count(std::string(kMigratedKeysKey)) == 1);

  // The format-1 password opens format-2 full keys.
  {
    auto repo = w.open_repo();
    CHECK(repo->config().version == 2);
    CHECK(repo->keys().format == 2);
    CHECK(repo->keys().full());
    CHECK(repo->keys().index != repo->keys().data);
  }
  CHECK(w.check_works() == 2);
  w.put_only_backup_dedupes("a");
  // A full key reads the put-only key's (format-2) snapshot and the old ones.
  CHECK(w.check_works() == 2);

  // A rerun has nothing left to do.
  {
    auto repo = w.open_repo();
    MigrateResult again = migrate_to_format2(*repo);
    CHECK(again.format_before == 2);
    CHECK_FALSE(again.made_as_format2);
    CHECK_FALSE(again.switched);
    CHECK_FALSE(again.keys_written);
    CHECK(again.packs_indexed == 0);
    CHECK(again.packs_already_indexed == packs);
  }

  // Prune removes the pack indexes of the packs it deletes.
  {
    auto repo = w.open_repo();
    for (const auto& [id, files] : w.snapshots) forget_snapshots(*repo, {id.hex()}, false);
    w.snapshots.clear();
    PruneOptions options;
    options.grace = std::chrono::seconds(0);
    PruneResult pruned = prune(*repo, options);
    CHECK(pruned.packs_deleted > 0);
  }
  CHECK(w.count("packs/") == 0);
  CHECK(w.count("pack-index/") == 0);
}

TEST_CASE("a repository made as format 2 has nothing to migrate", "[migrate]") {
  test::TempDir dir("keel-migrate-v2");
  auto store = std::make_shared<targets::memory::MemoryStore>();
  RepoConfig config;
  config.version = 2;
  auto repo = Repository::init(targets::memory::open_memory_target(store), config, {"pw", dir.file("c.db")});
  MigrateResult result = migrate_to_format2(*repo);
  CHECK(result.format_before == 2);
  CHECK(result.made_as_format2);
  CHECK_FALSE(result.switched);
  CHECK_FALSE(result.keys_written);
  for (const auto& [key, data] : store->objects()) {
    CHECK(key.rfind("pack-index/", 0) != 0);
    CHECK(key != kMigratedKeysKey);
  }
}

TEST_CASE("a migration killed after any write leaves a working repository that a rerun migrates", "[migrate]") {
  World w;
  const auto start = w.store->objects();
  const size_t packs = w.count("packs/");
  // How many writes a whole migration makes.
  uint64_t writes = 0;
  {
    auto dying = std::make_unique<DyingTarget>(w.open(), UINT64_MAX);
    DyingTarget& counter = *dying;
    auto repo = Repository::open(std::move(dying), {kPassword, w.catalog()});
    const uint64_t opening = counter.writes_done();
    migrate_to_format2(*repo);
    writes = counter.writes_done() - opening;
  }
  REQUIRE(writes >= packs + 4);  // the lock, keys-v2, a pack index each, the condemnation, the config
  for (uint64_t k = 0; k < writes; ++k) {
    INFO("killed after " << k << " of " << writes << " writes");
    w.store->set_objects(start);
    {
      auto dying = std::make_unique<DyingTarget>(w.open(), UINT64_MAX);
      DyingTarget& killer = *dying;
      auto repo = Repository::open(std::move(dying), {kPassword, w.catalog()});
      killer.arm(k);
      CHECK_THROWS_AS(migrate_to_format2(*repo), Error);
    }
    // The dead process's lock stays behind; on its host the next command
    // removes it (its process is gone), elsewhere it expires. This test
    // process lives on, so it is removed by hand.
    auto objects = w.store->objects();
    std::erase_if(objects, [](const auto& o) { return o.first.rfind("locks/", 0) == 0; });
    w.store->set_objects(objects);
    const uint32_t format = w.check_works();
    CHECK((format == 1 || format == 2));
    {
      auto repo = w.open_repo();
      MigrateResult rerun = migrate_to_format2(*repo);
      CHECK(rerun.switched == (format == 1));
      CHECK(rerun.packs_indexed + rerun.packs_already_indexed == packs);
    }
    CHECK(w.count("pack-index/") == packs);
    CHECK(w.count("condemned/") == 0);
    CHECK(w.check_works() == 2);
  }
  // The last one, once: the put-only key after a migration that was killed and rerun.
  w.put_only_backup_dedupes("b");
}
