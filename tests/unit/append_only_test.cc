// Append-only backups (docs/immutable.md) against a target that refuses, as
// the gateway's append grant does, every remove, every overwrite and every
// abort of stale uploads: several backups succeed without asking for one,
// their lease stays (written once, a day long) and catalog copies are kept;
// the owner's prune trims those copies later. Maintenance with such
// credentials is refused before it takes a lock it could not remove.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/catalog_copy.h"
#include "engine/lease.h"
#include "engine/prune.h"
#include "engine/restore.h"
#include "targets/memory/memory_target.h"
#include "targets/target_decorator.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;

namespace {

// Refuses what credentials with only "create" may not do, and counts the tries.
class CreateOnlyTarget final : public targets::TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;
  void put(const std::string& key, ByteView data) override {
    if (head(key)) refuse("overwrite " + key);
    TargetDecorator::put(key, data);
  }
  void remove(const std::string& key) override { refuse("remove " + key); }
  size_t remove_stale_uploads(std::chrono::seconds) override { refuse("abort uploads"); }

  std::atomic<int> refused{0};

 private:
  [[noreturn]] void refuse(const std::string& what) {
    ++refused;
    throw Error(ErrorKind::kTargetIo, "AccessDenied: " + what);
  }
};

}  // namespace

TEST_CASE("append-only backups neither delete nor overwrite", "[backup][append-only]") {
  test::TempDir dir("keel-append-only");
  auto store = std::make_shared<targets::memory::MemoryStore>();
  const std::string catalog = dir.file("catalog.db");
  Repository::init(targets::memory::open_memory_target(store), RepoConfig{}, {"secret", catalog});
  auto create_only = std::make_unique<CreateOnlyTarget>(targets::memory::open_memory_target(store));
  CreateOnlyTarget& target = *create_only;
  auto repo = Repository::open(std::move(create_only), {"secret", catalog});

  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  BackupOptions options;
  options.append_only = true;
  std::vector<Id> snapshots;
  for (int run = 0; run < 4; ++run) {
    const Bytes data = test::random_bytes(200'000 + run, run);
    std::ofstream(src + "/file" + std::to_string(run), std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    auto source = agents::fs::make_fs_source({src}, {});
    BackupProgress progress;
    BackupResult result = run_backup(*repo, *source, options, progress, [](const SkippedItem&) {});
    CHECK(result.catalog_copy_error.empty());
    snapshots.push_back(result.snapshot.id);
  }
  CHECK(target.refused == 0);

  // Each run's lease stays, written once with a day's expiry.
  const auto leases = list_leases(target, repo->keys().data, kRunningPrefix);
  REQUIRE(leases.size() == 4);
  for (const LeaseRecord& lease : leases) CHECK(lease.expires_unix - lease.created_unix == 24 * 3600);
  size_t copies = 0;
  for (const auto& [key, bytes] : store->objects()) copies += key.starts_with("catalog/");
  CHECK(copies == 4);  // a normal run keeps 3

  SECTION("without append_only the same target refuses the clean-up") {
    options.append_only = false;
    auto source = agents::fs::make_fs_source({src}, {});
    BackupProgress progress;
    CHECK_THROWS_WITH(run_backup(*repo, *source, options, progress, [](const SkippedItem&) {}),
                      Catch::Contains("abort uploads"));
  }
}

namespace {

size_t count_objects(const targets::memory::MemoryStore& store, std::string_view prefix) {
  size_t n = 0;
  for (const auto& [key, bytes] : store.objects()) n += key.starts_with(prefix);
  return n;
}

}  // namespace

TEST_CASE("prune with credentials that may not delete refuses before taking its lock", "[prune][append-only]") {
  test::TempDir dir("keel-append-only-prune");
  auto store = std::make_shared<targets::memory::MemoryStore>();
  Repository::init(targets::memory::open_memory_target(store), RepoConfig{}, {"secret", dir.file("owner.db")});
  auto create_only = std::make_unique<CreateOnlyTarget>(targets::memory::open_memory_target(store));
  CreateOnlyTarget& target = *create_only;
  auto repo = Repository::open(std::move(create_only), {"secret", dir.file("host.db")});
  const auto before = store->objects();
  try {
    prune(*repo, {});
    FAIL("prune ran with credentials that may not delete");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kTargetIo);
    CHECK_THAT(e.what(), Catch::Contains("may not delete") && Catch::Contains("no lock taken") &&
                             Catch::Contains("AccessDenied"));
  }
  CHECK(target.refused == 1);          // the one probe
  CHECK(store->objects() == before);   // no lock written, nothing else either
  // A dry run deletes nothing and takes no lock: it still runs.
  PruneOptions dry;
  dry.dry_run = true;
  CHECK_NOTHROW(prune(*repo, dry));
  CHECK(store->objects() == before);
}

TEST_CASE("prune trims the catalog copies append-only hosts leave", "[prune][append-only]") {
  test::TempDir dir("keel-append-only-copies");
  auto store = std::make_shared<targets::memory::MemoryStore>();
  Repository::init(targets::memory::open_memory_target(store), RepoConfig{}, {"secret", dir.file("owner.db")});
  // Two append-only hosts (two catalogs), five copies each; a normal host keeps its newest 3 itself.
  for (const char* host : {"a.db", "b.db"}) {
    auto repo = Repository::open(std::make_unique<CreateOnlyTarget>(targets::memory::open_memory_target(store)),
                                 {"secret", dir.file(host)});
    for (int i = 0; i < 5; ++i) save_catalog_copy(*repo, kKeepAllCopies);
  }
  REQUIRE(count_objects(*store, "catalog/") == 10);
  std::map<std::string, std::vector<std::string>> newest;  // per catalog, the 3 newest keys
  for (const auto& [key, bytes] : store->objects()) {
    if (key.starts_with("catalog/")) newest[key.substr(0, key.rfind('/'))].push_back(key);
  }
  REQUIRE(newest.size() == 2);
  for (auto& [id, keys] : newest) keys.erase(keys.begin(), keys.end() - 3);  // keys sort by time

  auto owner = Repository::open(targets::memory::open_memory_target(store), {"secret", dir.file("owner.db")});
  PruneOptions dry;
  dry.dry_run = true;
  CHECK(prune(*owner, dry).catalog_copies_removed == 0);
  CHECK(count_objects(*store, "catalog/") == 10);
  PruneResult pruned = prune(*owner, {});
  CHECK(pruned.catalog_copies_removed == 4);
  std::map<std::string, std::vector<std::string>> left;
  for (const auto& [key, bytes] : store->objects()) {
    if (key.starts_with("catalog/")) left[key.substr(0, key.rfind('/'))].push_back(key);
  }
  CHECK(left == newest);
  // The history of each host still reads back from its newest copy.
  CHECK(import_newest_history(*owner).copy.has_value());
}

TEST_CASE("catalog copies forged with later times do not push the real history out", "[prune][append-only]") {
  // Credentials that may create objects write copies under a real
  // catalog's id, named later than its real ones: garbage, and a real
  // copy's bytes under a new name (each frame is bound to its name). Before,
  // prune kept the newest three by name and deleted every real copy.
  test::TempDir dir("keel-forged-copies");
  auto store = std::make_shared<targets::memory::MemoryStore>();
  Repository::init(targets::memory::open_memory_target(store), RepoConfig{}, {"secret", dir.file("owner.db")});
  auto host = Repository::open(targets::memory::open_memory_target(store), {"secret", dir.file("host.db")});
  const CatalogCopyInfo first = save_catalog_copy(*host, kKeepAllCopies);
  const CatalogCopyInfo real = save_catalog_copy(*host, kKeepAllCopies);

  auto thief = targets::memory::open_memory_target(store);
  auto later = [&](int seconds) {  // a copy's name, `seconds` after the real one
    std::string digits = std::to_string(real.time_ns + seconds * 1'000'000'000LL);
    return "catalog/" + real.catalog_id + "/" + std::string(20 - digits.size(), '0') + digits;
  };
  for (int i = 1; i <= 3; ++i) thief->put(later(i), as_bytes(std::string("KEELCAT1 garbage")));
  thief->put(later(4), store->objects().at(real.key));
  REQUIRE(count_objects(*store, "catalog/") == 6);

  auto owner = Repository::open(targets::memory::open_memory_target(store), {"secret", dir.file("owner.db")});
  PruneResult pruned = prune(*owner, {});
  CHECK(pruned.catalog_copies_removed == 4);  // the forged ones; the older real copy stays within the newest 3
  std::set<std::string> left;
  for (const auto& [key, bytes] : store->objects()) {
    if (key.starts_with("catalog/")) left.insert(key);
  }
  CHECK(left == std::set<std::string>{first.key, real.key});
  REQUIRE(import_newest_history(*owner).copy.has_value());
  CHECK(import_newest_history(*owner).copy->key == real.key);

  SECTION("a host's own save never checks what it just wrote, and trims as before") {
    for (int i = 0; i < 3; ++i) save_catalog_copy(*host);
    CHECK(count_objects(*store, "catalog/") == 3);
  }
}
