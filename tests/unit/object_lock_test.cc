// Object Lock repositories (docs/immutable.md) on the memory target playing a
// bucket with Object Lock: every object keel writes but leases is locked, a
// backup extends the locks of older packs its snapshot uses (without writing
// them again), forget refuses a locked snapshot, prune never deletes a locked
// pack and deletes it once its lock has ended.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/forget.h"
#include "engine/object_lock.h"
#include "engine/prune.h"
#include "targets/memory/memory_target.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;

namespace {

constexpr int64_t kDay = 86400;

RepoConfig locked_config() {
  RepoConfig config;
  config.object_lock = ObjectLockConfig{targets::LockMode::kGovernance, std::chrono::seconds(kDay)};
  return config;
}

std::unique_ptr<targets::Target> bucket(const std::shared_ptr<targets::memory::MemoryStore>& store) {
  return targets::memory::open_memory_target(store, {.name = "vault", .object_lock = true});
}

Id back_up(Repository& repo, const std::string& src, const std::string& file, uint64_t seed) {
  std::filesystem::remove_all(src);
  std::filesystem::create_directories(src);
  const Bytes data = test::random_bytes(300'000, seed);
  std::ofstream(src + "/" + file, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  auto source = agents::fs::make_fs_source({src}, {});
  BackupProgress progress;
  return run_backup(repo, *source, BackupOptions{}, progress, [](const SkippedItem&) {}).snapshot.id;
}

// Ends the locks of every object under `prefix`, as time passing would.
void expire(targets::memory::MemoryStore& store, const std::string& prefix) {
  for (const auto& [key, bytes] : store.objects()) {
    if (key.starts_with(prefix)) store.set_retention(key, targets::Retention{targets::LockMode::kGovernance, 1});
  }
}

}  // namespace

TEST_CASE("Object Lock needs a target that can lock", "[object-lock]") {
  auto store = std::make_shared<targets::memory::MemoryStore>();
  CHECK_THROWS_MATCHES(
      Repository::init(targets::memory::open_memory_target(store), locked_config(), {"secret", std::string(kInMemoryCatalog)}),
      Error, Catch::Matchers::Predicate<Error>([](const Error& e) {
        return e.kind() == ErrorKind::kUsage && std::string(e.what()).find("has no Object Lock") != std::string::npos;
      }));
  CHECK(store->objects().empty());
}

TEST_CASE("an Object Lock repository locks, extends and never deletes what is locked", "[object-lock]") {
  test::TempDir dir("keel-object-lock");
  auto store = std::make_shared<targets::memory::MemoryStore>();
  const std::string catalog = dir.file("catalog.db"), src = dir.file("src");
  Repository::init(bucket(store), locked_config(), {"secret", catalog});
  auto repo = Repository::open(bucket(store), {"secret", catalog});
  REQUIRE(repo->config().object_lock);  // an optional config section, read back
  REQUIRE(repo->config().object_lock->period == std::chrono::seconds(kDay));
  const Id first = back_up(*repo, src, "a", 1);
  const Id second = back_up(*repo, src, "b", 2);

  const int64_t now = targets::unix_now();
  size_t locked = 0;
  for (const auto& [key, bytes] : store->objects()) {
    const std::optional<targets::Retention> retention = store->retention(key);
    if (key.starts_with("running/") || key.starts_with("locks/")) {
      CHECK_FALSE(retention);
      continue;
    }
    INFO(key);
    REQUIRE(retention);
    CHECK(retention->until_unix >= now + kDay);
    ++locked;
  }
  CHECK(locked > 6);  // config, key, packs, snapshots, log entries, catalog copies

  SECTION("a backup extends the lock of older packs its snapshot uses") {
    std::string pack;
    for (const auto& [key, bytes] : store->objects()) {
      if (key.starts_with("packs/")) pack = key;
    }
    store->set_retention(pack, targets::Retention{targets::LockMode::kGovernance, now + 60});
    const Bytes before = store->objects().at(pack);
    // Another host's catalog knows nothing of the locks: it asks, and extends the short one.
    auto other = Repository::open(bucket(store), {"secret", std::string(kInMemoryCatalog)});
    const std::vector<std::string> short_locks = find_short_retention(*other);  // keel check
    REQUIRE(short_locks.size() == 1);
    CHECK_THAT(short_locks[0], Catch::Contains(pack) && Catch::Contains("locked only until"));
    const RetentionRenewal renewed = renew_snapshot_retention(*other, other->catalog().list_snapshots().back());
    const RetentionRenewal all = renew_pack_retention(*other, [&] {
      std::vector<Id> ids;
      for (const catalog::PackRecord& p : other->catalog().list_packs()) ids.push_back(p.id);
      return ids;
    }());
    CHECK(renewed.packs_extended + all.packs_extended == 1);
    CHECK(store->retention(pack)->until_unix >= now + kDay);
    CHECK(store->objects().at(pack) == before);
    // Now known: nothing more to ask.
    CHECK(find_short_retention(*other).empty());
  }

  SECTION("forget keeps locked snapshots, refuses one named; prune deletes a pack only once its lock ends") {
    CHECK_THROWS_MATCHES(forget_snapshots(*repo, {first.hex()}, false), Error,
                         Catch::Matchers::Predicate<Error>([](const Error& e) {
                           return e.kind() == ErrorKind::kLocked &&
                                  std::string(e.what()).find("retention until") != std::string::npos;
                         }));
    // A policy keeps what is locked, and says until when.
    const std::vector<ForgetDecision> kept = forget(*repo, {}, RetentionPolicy{.last = 1}, GroupBy::kNone, false);
    REQUIRE(kept.size() == 2);
    CHECK(kept[1].snapshot.id == first);
    CHECK(kept[1].keep);
    REQUIRE(kept[1].locked);
    CHECK(kept[1].locked->until_unix >= now + kDay);
    CHECK(kept[1].reasons.at(0).find("locked (GOVERNANCE) until ") == 0);
    CHECK(!kept[0].locked);
    CHECK(repo->catalog().list_snapshots().size() == 2);
    CHECK_THROWS_AS(repo->target().remove(snapshot_key(first)), Error);
    CHECK(store->objects().count(snapshot_key(first)));

    expire(*store, "snapshots/");
    CHECK(!forget(*repo, {}, RetentionPolicy{.last = 1}, GroupBy::kNone, false)[1].keep);
    REQUIRE(repo->catalog().list_snapshots().size() == 1);
    CHECK(repo->catalog().list_snapshots().front().id == second);
    const size_t packs_before = repo->catalog().list_packs().size();
    PruneResult pruned = prune(*repo, PruneOptions{.grace = std::chrono::seconds(0), .repack_threshold = 0});
    CHECK(pruned.packs_deleted == 0);
    CHECK(pruned.packs_locked > 0);
    CHECK(repo->catalog().list_packs().size() == packs_before);

    expire(*store, "packs/");
    // A new catalog: what it learns of the locks comes from the target.
    auto fresh = Repository::open(bucket(store), {"secret", std::string(kInMemoryCatalog)});
    pruned = prune(*fresh, PruneOptions{.grace = std::chrono::seconds(0), .repack_threshold = 0});
    CHECK(pruned.packs_locked == 0);
    CHECK(pruned.packs_deleted > 0);
    // The packs in use were locked again ahead of their expiry.
    CHECK(pruned.packs_lock_extended > 0);
    for (const catalog::PackRecord& p : fresh->catalog().list_packs()) {
      CHECK(store->retention(pack_key(p.id))->until_unix >= now + kDay);
    }
  }
}
