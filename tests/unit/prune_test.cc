// Prune on a local target in a temporary directory, with a clock the tests
// move: two-phase deletion, resurrection, running backups, repacking, the
// maintenance lock, and the compact mark structure.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/check.h"
#include "engine/forget.h"
#include "engine/lease.h"
#include "engine/live_blobs.h"
#include "engine/prune.h"
#include "engine/restore.h"
#include "targets/local/local_target.h"
#include "targets/target_decorator.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kHour = 3600;
// The fake clock's first reading: a year ahead of the store's clock (the
// files' mtimes), so that the dates prune writes decide here, as they do
// when the clocks agree; put_only_test judges records by the store's clock.
const int64_t kStart = unix_now() + 365 * 24 * kHour;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("keel-prune-test-" + Id::random().short_hex());
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

using test::random_bytes;

// A repository with small chunks and packs (many packs from little data),
// a source tree to back up, and a clock the test sets.
struct Fixture {
  TempDir dir;
  int64_t now = kStart;
  std::unique_ptr<Repository> repo;

  Fixture() {
    RepoConfig config;
    config.chunker = {1024, 4096, 16384};
    config.pack_size = 64 << 10;
    config.part_size = 64 << 10;
    repo = Repository::init(targets::local::open_local_target(repo_path(), true), config,
                            // Not beside src/: files the catalog writes (its copies'
                            // scratch files) would change an ancestor's mtime, and so its tree.
                            {"secret", (dir.path / "state" / "catalog.db").string()});
  }

  std::string repo_path() const { return (dir.path / "repo").string(); }
  std::string src(const std::string& name) const { return (dir.path / "src" / name).string(); }

  // A second view of the same repository, as another host with its own catalog would have.
  std::unique_ptr<Repository> open_elsewhere(const std::string& catalog_name) {
    return Repository::open(targets::local::open_local_target(repo_path(), false),
                            {"secret", (dir.path / catalog_name).string()});
  }

  void write(const std::string& path, size_t size, uint64_t seed) {
    fs::create_directories(fs::path(path).parent_path());
    Bytes data = random_bytes(size, seed);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }

  catalog::SnapshotRecord backup(const std::string& path) {
    auto source = agents::fs::make_fs_source({path}, {});
    BackupOptions options;
    options.workers = 2;
    BackupProgress progress;
    return run_backup(*repo, *source, options, progress).snapshot;
  }

  PruneOptions options(int64_t grace_seconds) {
    PruneOptions o;
    o.grace = std::chrono::seconds(grace_seconds);
    o.repack_threshold = 0;  // tests that repack ask for it
    o.clock = [this] { return now; };
    return o;
  }

  PruneResult prune(int64_t grace_seconds) { return engine::prune(*repo, options(grace_seconds)); }

  // Two snapshots, of src/old and src/keep, and the first forgotten (after
  // `before_forget`): the packs it alone used (returned) are garbage.
  struct OldAndKept {
    std::set<Id> old_packs;
    catalog::SnapshotRecord kept;
  };
  OldAndKept old_and_kept(size_t old_bytes, size_t kept_bytes, uint64_t seed,
                          const std::function<void()>& before_forget = {}) {
    write(src("old/a.bin"), old_bytes, seed);
    write(src("keep/b.bin"), kept_bytes, seed + 1);
    backup(src("old"));
    OldAndKept out;
    for (const auto& p : repo->catalog().list_packs()) out.old_packs.insert(p.id);
    out.kept = backup(src("keep"));
    if (before_forget) before_forget();
    forget_path(src("old"));
    return out;
  }

  // Backs up 24 files, removes every other one, backs up again and forgets
  // the first snapshot: about half of every data pack is garbage.
  catalog::SnapshotRecord half_forgotten(uint64_t seed) {
    for (int i = 0; i < 24; ++i) write(src("data/f" + std::to_string(i)), 12'000, seed + i);
    backup(src("data"));
    for (int i = 0; i < 24; i += 2) fs::remove(src("data/f" + std::to_string(i)));
    catalog::SnapshotRecord kept = backup(src("data"));
    RetentionPolicy last_one;
    last_one.last = 1;
    forget(*repo, {}, last_one, GroupBy::kHostAndPaths, false);
    return kept;
  }

  // Removes snapshots of `path` the way keel forget does.
  void forget_path(const std::string& path) {
    RetentionPolicy keep_nothing_untagged;
    keep_nothing_untagged.keep_tags = {"keep"};
    forget(*repo, {.paths = {path}}, keep_nothing_untagged, GroupBy::kHostAndPaths, false);
  }

  std::set<std::string> keys(const std::string& prefix) {
    std::set<std::string> out;
    repo->target().list(prefix, [&](const targets::ObjectInfo& o) { out.insert(o.key); });
    return out;
  }

  void check_clean() {
    CheckOptions check;
    check.read_data = true;
    CheckResult result = run_check(*repo, check);
    for (const auto& p : result.problems) FAIL_CHECK(p.message);
  }

  // Restores `snapshot` and compares every file under `path` with the source.
  void restores_identical(const catalog::SnapshotRecord& snapshot, const std::string& path) {
    fs::path out = dir.path / ("restore-" + Id::random().short_hex());
    RestoreOptions options;
    options.target_dir = out.string();
    RestoreProgress progress;
    RestoreResult result = run_restore(*repo, snapshot, options, progress);
    CHECK(result.failures.empty());
    size_t files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(path)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      fs::path restored = out / fs::path(entry.path()).relative_path();
      std::ifstream a(entry.path(), std::ios::binary), b(restored, std::ios::binary);
      std::string x((std::istreambuf_iterator<char>(a)), {}), y((std::istreambuf_iterator<char>(b)), {});
      CHECK(x == y);
    }
    CHECK(files > 0);
  }
};

size_t count(const PruneResult& r, PackAction action) {
  return std::count_if(r.decisions.begin(), r.decisions.end(), [&](const PackDecision& d) { return d.action == action; });
}

std::set<Id> packs_of(Repository& repo) {
  std::set<Id> ids;
  for (const auto& p : repo.catalog().list_packs()) ids.insert(p.id);
  return ids;
}

}  // namespace

TEST_CASE("prune condemns unused packs and deletes them only after the grace period", "[prune]") {
  Fixture f;
  auto [old_packs, kept] = f.old_and_kept(200'000, 150'000, 1);
  std::set<std::string> pack_keys_before = f.keys("packs/");

  PruneResult first = f.prune(kHour);
  CHECK(first.packs_condemned == old_packs.size());
  CHECK(first.packs_deleted == 0);
  CHECK(first.packs_waiting == old_packs.size());
  CHECK(f.keys("packs/") == pack_keys_before);
  CHECK(f.keys("condemned/").size() == 1);
  for (const auto& p : f.repo->catalog().list_packs()) {
    CHECK(p.condemned_unix.has_value() == (old_packs.count(p.id) > 0));
  }

  f.now += kHour / 2;
  PruneResult early = f.prune(kHour);
  CHECK(early.packs_condemned == 0);
  CHECK(early.packs_deleted == 0);
  CHECK(early.packs_waiting == old_packs.size());
  for (const PackDecision& d : early.decisions) CHECK(d.deletable_unix == kStart + kHour);

  f.now += kHour;
  PruneResult late = f.prune(kHour);
  CHECK(late.packs_deleted == old_packs.size());
  CHECK(late.bytes_deleted > 150'000);
  CHECK(f.keys("packs/").size() == pack_keys_before.size() - old_packs.size());
  CHECK(f.keys("condemned/").empty());
  CHECK(f.keys("locks/").empty());
  for (const Id& id : old_packs) CHECK_FALSE(f.repo->catalog().has_pack(id));
  f.check_clean();
  f.restores_identical(kept, f.src("keep"));
}

TEST_CASE("prune with grace 0 condemns and deletes in one run", "[prune]") {
  Fixture f;
  auto [old_packs, kept] = f.old_and_kept(100'000, 100'000, 3);
  PruneResult r = f.prune(0);
  CHECK(r.packs_condemned == old_packs.size());
  CHECK(r.packs_deleted == old_packs.size());
  CHECK(r.live_blobs > 0);
  CHECK(f.keys("condemned/").empty());
  f.check_clean();
  f.restores_identical(kept, f.src("keep"));

  PruneResult again = f.prune(0);
  CHECK(again.decisions.empty());
}

TEST_CASE("a snapshot that uses condemned data again brings its packs back", "[prune]") {
  Fixture f;
  f.write(f.src("old/a.bin"), 120'000, 5);
  catalog::SnapshotRecord old = f.backup(f.src("old"));
  f.write(f.src("keep/b.bin"), 50'000, 6);
  f.backup(f.src("keep"));
  f.forget_path(f.src("old"));
  PruneResult condemned = f.prune(kHour);
  REQUIRE(condemned.packs_condemned > 0);

  // A backup that loaded its dedupe index before the condemnation finishes
  // now: its snapshot refers to the condemned data (here: the old tree).
  catalog::SnapshotRecord late = old;
  late.id = Id::random();
  f.repo->save_snapshot(late);

  f.now += 2 * kHour;
  PruneResult r = f.prune(kHour);
  CHECK(r.packs_deleted == 0);
  CHECK(r.packs_resurrected == condemned.packs_condemned);
  CHECK(count(r, PackAction::kResurrect) == condemned.packs_condemned);
  CHECK(f.keys("condemned/").empty());
  for (const auto& p : f.repo->catalog().list_packs()) CHECK_FALSE(p.condemned_unix.has_value());
  f.check_clean();
  f.restores_identical(late, f.src("old"));
}

TEST_CASE("a backup after condemnation stores condemned data again instead of using it", "[prune]") {
  Fixture f;
  f.write(f.src("data/a.bin"), 150'000, 7);
  f.backup(f.src("data"));
  std::set<Id> first_packs = packs_of(*f.repo);
  // Data blobs only: the trees of the source's ancestors (/tmp, ...) change
  // whenever anything else touches those directories, so the second backup
  // need not store the same trees again.
  std::vector<Id> first_blobs;
  for (const Id& id : first_packs) {
    for (const auto& blob : f.repo->catalog().blobs_in_pack(id)) {
      if (blob.type == catalog::BlobType::kData) first_blobs.push_back(blob.id);
    }
  }
  f.forget_path(f.src("data"));
  f.prune(kHour);  // condemns everything

  // Same content, new snapshot: nothing may refer to the condemned packs.
  BackupProgress progress;
  auto source = agents::fs::make_fs_source({f.src("data")}, {});
  BackupResult again = run_backup(*f.repo, *source, {}, progress);
  CHECK(again.snapshot.stats.bytes_added > 150'000);
  REQUIRE(first_blobs.size() > 10);
  for (const Id& blob : first_blobs) CHECK(first_packs.count(f.repo->catalog().find_blob(blob)->pack) == 0);

  f.now += 2 * kHour;
  PruneResult r = f.prune(kHour);
  CHECK(r.packs_deleted == first_packs.size());
  CHECK(r.packs_resurrected == 0);
  f.check_clean();
  f.restores_identical(again.snapshot, f.src("data"));
}

TEST_CASE("packs condemned while a backup runs wait until it ends", "[prune]") {
  Fixture f;
  size_t old_packs = f.old_and_kept(100'000, 60'000, 8).old_packs.size();

  auto running = std::make_unique<Lease>(f.repo->target(), f.repo->keys().data, kRunningPrefix,
                                         LeaseOptions{.clock = [&] { return f.now; }});
  PruneResult r = f.prune(0);
  CHECK(r.packs_condemned == old_packs);
  CHECK(r.packs_deleted == 0);
  CHECK(r.running_backups == 1);
  for (const PackDecision& d : r.decisions) {
    if (d.action == PackAction::kWait) CHECK(d.waiting_for_backups == 1);
  }

  // A backup that starts after the condemnation saw it: it does not hold the packs back.
  Lease later(f.repo->target(), f.repo->keys().data, kRunningPrefix, LeaseOptions{.clock = [&] { return f.now; }});
  CHECK(f.prune(0).packs_deleted == 0);
  running.reset();
  PruneResult after = f.prune(0);
  CHECK(after.packs_deleted == old_packs);
  CHECK(after.running_backups == 1);
  f.check_clean();
}

TEST_CASE("the lease of a backup that died expires and is cleaned up", "[prune]") {
  Fixture f;
  f.write(f.src("old/a.bin"), 60'000, 10);
  f.backup(f.src("old"));
  f.forget_path(f.src("old"));
  // Written an hour ago with a 30-minute ttl, never refreshed.
  Lease dead(f.repo->target(), f.repo->keys().data, kRunningPrefix, LeaseOptions{.clock = [&] { return f.now - kHour; }});
  REQUIRE(f.keys("running/").size() == 1);
  PruneResult r = f.prune(0);
  CHECK(r.running_backups == 0);
  CHECK(r.packs_deleted > 0);
  CHECK(f.keys("running/").empty());
}

TEST_CASE("repacking copies live blobs out of mostly empty packs and keeps data readable", "[prune]") {
  Fixture f;
  catalog::SnapshotRecord kept = f.half_forgotten(100);

  uint64_t bytes_before = 0;
  for (const auto& p : f.repo->catalog().list_packs()) bytes_before += p.size;
  PruneOptions o = f.options(0);
  o.repack_threshold = 0.9;
  PruneResult r = engine::prune(*f.repo, o);
  CHECK(r.packs_repacked > 0);
  CHECK(r.packs_written > 0);
  CHECK(r.bytes_repacked > 0);
  CHECK(r.packs_deleted == r.packs_repacked + r.packs_condemned);
  CHECK(r.warnings.empty());
  uint64_t bytes_after = 0;
  for (const auto& p : f.repo->catalog().list_packs()) bytes_after += p.size;
  CHECK(bytes_after < bytes_before * 3 / 4);
  f.check_clean();
  f.restores_identical(kept, f.src("data"));

  // Another host's catalog learns the new locations from the target alone.
  auto elsewhere = f.open_elsewhere("other.db");
  CheckOptions check;
  check.read_data = true;
  CHECK(run_check(*elsewhere, check).problems.empty());
}

TEST_CASE("repacking stops at --max-repack", "[prune]") {
  Fixture f;
  f.half_forgotten(200);
  PruneOptions o = f.options(0);
  o.repack_threshold = 0.9;
  o.dry_run = true;
  std::vector<uint64_t> candidates;
  for (const PackDecision& d : engine::prune(*f.repo, o).decisions) {
    if (d.action == PackAction::kRepack) candidates.push_back(d.size);
  }
  REQUIRE(candidates.size() > 2);
  o.dry_run = false;
  o.max_repack = *std::min_element(candidates.begin(), candidates.end()) + 1000;
  PruneResult r = engine::prune(*f.repo, o);
  CHECK(r.packs_repacked >= 1);
  CHECK(r.packs_repacked < candidates.size());
  uint64_t repacked_bytes = 0;
  for (const PackDecision& d : r.decisions) {
    if (d.action == PackAction::kRepack) repacked_bytes += d.size;
  }
  CHECK(repacked_bytes <= o.max_repack);
  f.check_clean();
}

TEST_CASE("a dry run decides but changes nothing", "[prune]") {
  Fixture f;
  f.old_and_kept(100'000, 50'000, 11);
  std::set<std::string> before = f.keys("");
  PruneOptions o = f.options(0);
  o.dry_run = true;
  PruneResult r = engine::prune(*f.repo, o);
  CHECK(r.dry_run);
  CHECK(r.packs_condemned > 0);
  CHECK(r.packs_deleted == r.packs_condemned);
  CHECK(f.keys("") == before);
  for (const auto& p : f.repo->catalog().list_packs()) CHECK_FALSE(p.condemned_unix.has_value());
}

TEST_CASE("condemnations and deletions reach other hosts' catalogs", "[prune]") {
  Fixture f;
  std::unique_ptr<Repository> other;
  std::set<Id> old_packs = f.old_and_kept(100'000, 50'000, 13, [&] {
                              other = f.open_elsewhere("other.db");
                              CHECK(other->catalog().list_snapshots().size() == 2);
                            }).old_packs;
  f.prune(kHour);
  other->sync_catalog();
  CHECK(other->catalog().list_snapshots().size() == 1);  // forgotten elsewhere
  for (const auto& p : other->catalog().list_packs()) CHECK(p.condemned_unix.has_value() == (old_packs.count(p.id) > 0));

  // A rebuilt catalog sees them too.
  auto rebuilt = f.open_elsewhere("rebuilt.db");
  for (const auto& p : rebuilt->catalog().list_packs()) CHECK(p.condemned_unix.has_value() == (old_packs.count(p.id) > 0));

  f.now += 2 * kHour;
  f.prune(kHour);
  other->sync_catalog();
  CHECK(packs_of(*other) == packs_of(*f.repo));
  // The prune from another host with its own catalog finds nothing left to do.
  PruneOptions o = f.options(kHour);
  CHECK(engine::prune(*other, o).decisions.empty());
}

TEST_CASE("the maintenance lock refuses a second run and expires", "[prune][lease]") {
  Fixture f;
  Repository& repo = *f.repo;
  int64_t now = kStart;
  LeaseOptions at_now{.clock = [&] { return now; }};
  {
    auto held = acquire_lock(repo.target(), repo.keys().data, at_now);
    try {
      acquire_lock(repo.target(), repo.keys().data, at_now);
      FAIL("took a lock that is held");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kLocked);
      CHECK_THAT(e.what(), Catch::Contains("locked by a maintenance run") &&
                               Catch::Contains(lease_key(kLockPrefix, held->record().id)));
    }
    PruneOptions o = f.options(0);
    CHECK_THROWS_MATCHES(engine::prune(repo, o), Error,
                         Catch::Predicate<Error>([](const Error& e) { return e.kind() == ErrorKind::kLocked; }));
    o.dry_run = true;  // reads only: no lock needed
    CHECK_NOTHROW(engine::prune(repo, o));
  }
  CHECK(f.keys("locks/").empty());  // released

  // A lock whose holder died: expired once its ttl has passed without refresh.
  Bytes stale;
  Id stale_id;
  {
    auto dead = acquire_lock(repo.target(), repo.keys().data, at_now);
    stale_id = dead->record().id;
    stale = repo.target().get(lease_key(kLockPrefix, stale_id));
  }
  repo.target().put(lease_key(kLockPrefix, stale_id), stale);
  now += 10 * 60;
  CHECK_THROWS(acquire_lock(repo.target(), repo.keys().data, at_now));
  now += kHour;
  auto taken = acquire_lock(repo.target(), repo.keys().data, at_now);
  CHECK(f.keys("locks/") == std::set<std::string>{lease_key(kLockPrefix, taken->record().id)});
}

TEST_CASE("a lease that could not be refreshed is no longer held", "[prune][lease]") {
  Fixture f;
  int64_t now = kStart;
  Lease lease(f.repo->target(), f.repo->keys().data, kRunningPrefix,
              LeaseOptions{.ttl = std::chrono::seconds(1800), .refresh = std::chrono::seconds(600), .clock = [&] { return now; }});
  CHECK_NOTHROW(lease.check_held());
  std::vector<LeaseRecord> listed = list_leases(f.repo->target(), f.repo->keys().data, kRunningPrefix);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].id == lease.record().id);
  CHECK(listed[0].expires_unix == kStart + 1800);
  CHECK_FALSE(listed[0].expired(kStart + 1799));
  CHECK(listed[0].expired(kStart + 1800));
  now += 1500;  // no refresh happened (the thread waits 10 minutes of real time)
  CHECK_THROWS_AS(lease.check_held(), Error);
}

TEST_CASE("LiveBlobs marks exactly what snapshots reference, in under 64 bytes a blob", "[prune]") {
  Fixture f;
  for (int i = 0; i < 40; ++i) f.write(f.src("data/d" + std::to_string(i % 4) + "/f" + std::to_string(i)), 9'000, 300 + i);
  catalog::SnapshotRecord first = f.backup(f.src("data"));
  for (int i = 0; i < 40; i += 3) fs::remove(f.src("data/d" + std::to_string(i % 4) + "/f" + std::to_string(i)));
  catalog::SnapshotRecord second = f.backup(f.src("data"));

  std::set<Id> referenced{second.root};
  walk_snapshot(*f.repo, second, "/", [&](const std::string&, const TreeEntry& e) {
    if (e.meta.type == NodeType::kDir) referenced.insert(e.subtree);
    for (const ContentRef& r : e.content) {
      if (!r.hole) referenced.insert(r.chunk);
    }
  });
  std::vector<catalog::PackRecord> packs = f.repo->catalog().list_packs();
  LiveBlobs live(f.repo->catalog(), packs);
  live.mark(*f.repo, second);
  CHECK(live.live_blobs() == referenced.size());
  size_t dead = 0;
  f.repo->catalog().for_each_blob_location([&](const catalog::BlobLocation& loc) {
    CHECK(live.live(loc.blob.id) == (referenced.count(loc.blob.id) > 0));
    dead += referenced.count(loc.blob.id) == 0;
  });
  CHECK(dead > 0);  // the first snapshot's removed files
  CHECK(live.live(Id::random()));  // unknown blobs count as live

  uint64_t live_bytes = 0;
  for (const LiveBlobs::PackUse& u : live.pack_use()) live_bytes += u.live_bytes;
  uint64_t expected_bytes = 0;
  for (const Id& id : referenced) expected_bytes += f.repo->catalog().find_blob(id)->blob.stored_length;
  CHECK(live_bytes == expected_bytes);

  live.mark(*f.repo, first);
  CHECK(live.live_blobs() == live.blobs());
  CHECK(live.unindexed_references() == 0);
  CHECK(static_cast<double>(live.memory_bytes()) / static_cast<double>(live.blobs()) < 64.0);
}

TEST_CASE("a repository with external roots is pruned only with them", "[prune]") {
  Fixture f;
  auto [old_packs, kept] = f.old_and_kept(100'000, 100'000, 5);
  declare_external_roots(*f.repo, "a test's dedupe store");
  declare_external_roots(*f.repo, "a test's dedupe store");  // again: harmless

  try {
    f.prune(0);
    FAIL("prune without roots ran");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kUsage);
    CHECK_THAT(e.what(), Catch::Contains("a test's dedupe store") && Catch::Contains("keel gateway gc"));
  }
  CHECK(f.keys("condemned/").empty());

  // With roots naming every chunk of the forgotten snapshot's packs, nothing of them goes.
  PruneOptions options = f.options(0);
  std::vector<Id> old_chunks;
  for (const Id& pack : old_packs)
    for (const auto& blob : f.repo->catalog().blobs_in_pack(pack)) old_chunks.push_back(blob.id);
  options.extra_roots = [&](const auto& mark) {
    for (const Id& id : old_chunks) mark(id);
  };
  PruneResult r = engine::prune(*f.repo, options);
  CHECK(r.packs_deleted == 0);
  f.restores_identical(kept, f.src("keep"));
}

namespace {

// Runs `before` ahead of every listing of packs/: what a prune on another
// host does while a check syncs and lists.
class BeforePackListing final : public targets::TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;
  void list(const std::string& prefix, const std::function<void(const targets::ObjectInfo&)>& fn) override {
    if (prefix == "packs/" && before) before();
    TargetDecorator::list(prefix, fn);
  }
  std::function<void()> before;
};

}  // namespace

TEST_CASE("check names no pack that a prune elsewhere deletes while it syncs and lists", "[prune][check]") {
  Fixture f;
  Fixture::OldAndKept old = f.old_and_kept(600'000, 40'000, 700);
  REQUIRE(old.old_packs.size() >= 8);
  auto hooked = std::make_unique<BeforePackListing>(targets::local::open_local_target(f.repo_path(), false));
  BeforePackListing& target = *hooked;
  auto checker = Repository::open(std::move(hooked), {"secret", (f.dir.path / "checker.db").string()});
  checker->sync_catalog();  // it knows the forgotten snapshot's packs
  // One garbage pack deleted before each listing, as a prune --grace 0 would:
  // every listing after a sync lacks a pack that sync still indexed.
  std::vector<Id> garbage(old.old_packs.begin(), old.old_packs.end());
  std::erase_if(garbage, [&](const Id& p) {
    return std::ranges::any_of(f.repo->catalog().blobs_in_pack(p), [&](const catalog::BlobRecord& b) {
      return b.type == catalog::BlobType::kTree;
    });
  });
  size_t deleted = 0;
  target.before = [&] {
    if (deleted < garbage.size()) f.repo->target().remove(pack_key(garbage[deleted++]));
  };
  CheckOptions check;
  check.read_data = true;
  CheckResult result = run_check(*checker, check);
  CHECK(deleted >= 4);
  for (const auto& p : result.problems) FAIL_CHECK(p.message);
  f.restores_identical(old.kept, f.src("keep"));
}

namespace {

// Runs `before` once, ahead of the `nth` ranged read of a key `reading`
// accepts: what a forget and a prune on other hosts do while a check reads.
class BeforeNthRead final : public targets::TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;
  size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) override {
    if (reading && reading(key) && ++reads == nth && before) std::exchange(before, nullptr)();
    return TargetDecorator::get_range(key, offset, out);
  }
  std::function<bool(const std::string&)> reading;
  int nth = 1;
  int reads = 0;
  std::function<void()> before;
};

// A pack of `packs` that holds chunks, not trees.
std::set<Id>::const_iterator data_pack_of(Repository& repo, const std::set<Id>& packs) {
  return std::ranges::find_if(packs, [&](const Id& p) {
    const auto blobs = repo.catalog().blobs_in_pack(p);
    return !blobs.empty() && blobs.front().type == catalog::BlobType::kData;
  });
}

}  // namespace

TEST_CASE("check names nothing of a snapshot that a forget and a prune elsewhere remove while it reads",
          "[prune][check]") {
  Fixture f;
  for (int d = 0; d < 12; ++d) f.write(f.src("old/d" + std::to_string(d) + "/a.bin"), 30'000, 720 + d);
  f.write(f.src("keep/b.bin"), 40'000, 740);
  f.backup(f.src("old"));
  const catalog::SnapshotRecord kept = f.backup(f.src("keep"));
  // The walk takes trees from the catalog; --read-data reads each from its pack.
  auto hooked = std::make_unique<BeforeNthRead>(targets::local::open_local_target(f.repo_path(), false));
  BeforeNthRead& target = *hooked;
  auto checker = Repository::open(std::move(hooked), {"secret", (f.dir.path / "checker.db").string()});
  target.reading = [](const std::string& key) { return key.starts_with("packs/"); };
  bool pruned = false;
  target.before = [&] {
    f.forget_path(f.src("old"));
    CHECK(f.prune(0).packs_deleted > 0);  // with the old snapshot's trees
    pruned = true;
  };
  CheckOptions check;
  check.read_data = true;
  CheckResult result = run_check(*checker, check);
  CHECK(pruned);
  for (const auto& p : result.problems) FAIL_CHECK(p.message);
  f.restores_identical(kept, f.src("keep"));
}

TEST_CASE("check names no pack that a prune elsewhere deletes while it reads it", "[prune][check]") {
  Fixture f;
  Fixture::OldAndKept old = f.old_and_kept(600'000, 40'000, 750);
  const auto data_pack = data_pack_of(*f.repo, old.old_packs);
  REQUIRE(data_pack != old.old_packs.end());
  auto hooked = std::make_unique<BeforeNthRead>(targets::local::open_local_target(f.repo_path(), false));
  BeforeNthRead& target = *hooked;
  auto checker = Repository::open(std::move(hooked), {"secret", (f.dir.path / "checker.db").string()});
  const std::string key = pack_key(*data_pack);
  target.reading = [&](const std::string& k) { return k == key; };
  target.nth = 2;  // its blobs read, its header not yet
  target.before = [&] { f.repo->target().remove(key); };  // its snapshot is forgotten: garbage
  CheckOptions check;
  check.read_data = true;
  CheckResult result = run_check(*checker, check);
  CHECK(target.reads >= 2);
  CHECK_FALSE(target.before);
  for (const auto& p : result.problems) FAIL_CHECK(p.message);
}

TEST_CASE("check still names the files whose chunks were in a lost pack", "[prune][check]") {
  Fixture f;
  f.write(f.src("keep/b.bin"), 300'000, 710);
  f.backup(f.src("keep"));
  std::set<Id> packs = packs_of(*f.repo);
  const auto data_pack = data_pack_of(*f.repo, packs);
  REQUIRE(data_pack != packs.end());
  f.repo->target().remove(pack_key(*data_pack));
  // The catalog that indexed the pack and one that never saw it alike.
  auto other = f.open_elsewhere("other.db");
  for (Repository* repo : {f.repo.get(), other.get()}) {
    CheckResult result = run_check(*repo, {});
    const bool files_named = std::ranges::any_of(result.problems, [](const CheckProblem& p) {
      return std::ranges::any_of(p.affected, [](const std::string& a) { return a.find("b.bin") != std::string::npos; });
    });
    CHECK(files_named);
  }
}
