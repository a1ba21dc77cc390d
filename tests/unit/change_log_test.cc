// The change log (engine/change_log.h): two Repository objects on one memory
// target are two hosts with their own catalogs. A host follows the other's
// backups, forgets and prunes by reading only log/ and the new entries, falls
// back to a full listing where it cannot be sure, and a read that finds a
// pack gone re-syncs and reads the blob from its other copy.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/blob_codec.h"
#include "engine/change_log.h"
#include "engine/forget.h"
#include "engine/pack.h"
#include "engine/prune.h"
#include "engine/sealed_object.h"
#include "targets/fault_injecting_target.h"
#include "targets/memory/memory_target.h"
#include "targets/metered_target.h"
#include "targets/target_decorator.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;
namespace fs = std::filesystem;

namespace {

std::set<Id> pack_ids(Repository& repo) {
  std::set<Id> out;
  for (const catalog::PackRecord& p : repo.catalog().list_packs()) out.insert(p.id);
  return out;
}

std::set<Id> snapshot_ids(Repository& repo) {
  std::set<Id> out;
  for (const catalog::SnapshotRecord& s : repo.catalog().list_snapshots()) out.insert(s.id);
  return out;
}

// Requests one host made of the target, by operation.
struct Requests {
  uint64_t list = 0, get = 0, head = 0;
  uint64_t reads() const { return get + head; }
};

struct Hosts {
  test::TempDir dir{"keel-change-log-test"};
  std::shared_ptr<targets::memory::MemoryStore> store = std::make_shared<targets::memory::MemoryStore>();
  std::unique_ptr<Repository> a, b;

  Hosts() {
    RepoConfig config;
    config.chunker = {1024, 4096, 16384};
    config.pack_size = 64 << 10;
    config.part_size = 64 << 10;
    a = Repository::init(metered(), config, {"secret", std::string(kInMemoryCatalog)});
    b = open_host();
  }

  std::unique_ptr<targets::Target> metered() {
    return targets::make_metered_target(targets::memory::open_memory_target(store));
  }
  std::unique_ptr<Repository> open_host() { return Repository::open(metered(), {"secret", std::string(kInMemoryCatalog)}); }

  static Requests requests(Repository& repo) {
    Requests r;
    for (const auto& [name, value] : repo.target().transfer_stats()) {
      if (name == "list_calls") r.list = value;
      if (name == "get_calls") r.get = value;
      if (name == "head_calls") r.head = value;
    }
    return r;
  }

  // What `fn` asked of host's target.
  static Requests cost(Repository& repo, const std::function<void()>& fn) {
    Requests before = requests(repo);
    fn();
    Requests after = requests(repo);
    return {after.list - before.list, after.get - before.get, after.head - before.head};
  }

  catalog::SnapshotRecord backup(Repository& repo, const std::string& name, size_t size, uint64_t seed) {
    fs::path path = dir.path / "src" / name;
    fs::create_directories(path);
    Bytes data = test::random_bytes(size, seed);
    std::ofstream(path / "data.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    auto source = agents::fs::make_fs_source({path.string()}, {});
    BackupOptions options;
    options.workers = 2;
    BackupProgress progress;
    return run_backup(repo, *source, options, progress).snapshot;
  }

  // One blob written by `repo` into a pack of its own; returns the pack.
  static Id store_blob(Repository& repo, const Id& id, ByteView raw) {
    ThreadPool uploads(1, 2);
    ByteBudget budget(1 << 20);
    ContentWriter writer(repo.content(), PackWriterOptions{64 << 10, 64 << 10}, uploads, budget);
    Bytes sealed;
    seal_blob(repo.keys().data, nullptr, id, raw, sealed);
    writer.add(catalog::BlobType::kData, id, static_cast<uint32_t>(raw.size()), sealed);
    writer.flush();
    std::vector<LoggedPack> packs = writer.take_committed();
    REQUIRE(packs.size() == 1);
    return packs.front().pack.id;
  }
};

}  // namespace

TEST_CASE("log keys sort by time and reject foreign names", "[changelog]") {
  std::string early = new_log_key(1'700'000'000'000'000'000);
  std::string late = new_log_key(1'700'000'000'000'000'001);
  CHECK(early < late);
  CHECK(log_key_time(early) == 1'700'000'000'000'000'000);
  CHECK(early.size() == std::string("log/").size() + 20 + 1 + 16);
  CHECK_FALSE(log_key_time("log/123-abc"));
  CHECK_FALSE(log_key_time("snapshots/00000000000000000001-0123456789abcdef"));
  CHECK_FALSE(log_key_time("log/0000000000000000000x-0123456789abcdef"));
}

TEST_CASE("a host follows another's backups by reading only the log and the new entries", "[changelog]") {
  Hosts h;
  for (int i = 0; i < 8; ++i) h.backup(*h.a, "base" + std::to_string(i), 300'000, 10 + i);
  size_t packs = pack_ids(*h.a).size();
  REQUIRE(packs >= 32);

  // Nothing new: log/ and snapshots/ listed, nothing read.
  h.b->follow_log();
  Requests idle = Hosts::cost(*h.b, [&] { h.b->follow_log(); });
  CHECK(idle.list == 2);
  CHECK(idle.reads() == 0);

  // One new backup elsewhere: log/, snapshots/ and condemned/ listed (packs
  // were added), the entry, the snapshot and its trees read; no pack
  // header, however many packs the repository holds.
  catalog::SnapshotRecord snap = h.backup(*h.a, "new", 100'000, 99);
  Requests one = Hosts::cost(*h.b, [&] { h.b->follow_log(); });
  CHECK(one.list == 3);
  CHECK(one.reads() <= 16);
  CHECK(snapshot_ids(*h.b) == snapshot_ids(*h.a));
  CHECK(pack_ids(*h.b) == pack_ids(*h.a));
  CHECK(h.b->catalog().blob_count() == h.a->catalog().blob_count());
  CHECK(h.b->catalog().get_tree(snap.root));

  // The full listing it replaces: every snapshot and every pack header.
  auto fresh = h.open_host();  // an empty catalog syncs in full on open
  Requests full = Hosts::cost(*fresh, [&] { fresh->rebuild_catalog(); });
  CHECK(full.list >= 4);
  CHECK(full.reads() >= pack_ids(*h.a).size());
  WARN("follow_log with nothing new: " << idle.list << " list, " << idle.reads() << " reads; one new backup: "
                                       << one.list << " list, " << one.reads() << " reads; full sync of "
                                       << pack_ids(*h.a).size() << " packs: " << full.list << " lists, " << full.reads()
                                       << " reads");
}

TEST_CASE("forget and prune on one host reach the other's catalog through the log", "[changelog]") {
  Hosts h;
  catalog::SnapshotRecord old = h.backup(*h.a, "old", 150'000, 1);
  catalog::SnapshotRecord kept = h.backup(*h.a, "kept", 150'000, 2);
  h.b->follow_log();
  REQUIRE(snapshot_ids(*h.b) == std::set<Id>{old.id, kept.id});

  RetentionPolicy keep_one;
  keep_one.last = 1;
  forget(*h.a, {}, keep_one, GroupBy::kNone, false);
  PruneOptions o;
  o.grace = std::chrono::seconds(0);
  PruneResult r = prune(*h.a, o);
  REQUIRE(r.packs_deleted > 0);

  Requests cost = Hosts::cost(*h.b, [&] { h.b->follow_log(); });
  CHECK(cost.list <= 3);  // log/, snapshots/, and condemned/ because condemnations changed
  CHECK(snapshot_ids(*h.b) == std::set<Id>{kept.id});
  CHECK(pack_ids(*h.b) == pack_ids(*h.a));
  CHECK(h.b->catalog().blob_count() == h.a->catalog().blob_count());
}

TEST_CASE("a forget killed before its log entry drops the snapshots from other hosts' catalogs too", "[changelog]") {
  Hosts h;
  catalog::SnapshotRecord old = h.backup(*h.a, "old", 50'000, 1);
  catalog::SnapshotRecord older = h.backup(*h.a, "older", 50'000, 2);
  catalog::SnapshotRecord kept = h.backup(*h.a, "kept", 50'000, 3);
  h.b->follow_log();
  REQUIRE(snapshot_ids(*h.b) == std::set<Id>{old.id, older.id, kept.id});

  // Host a's forget removes the objects, then dies before its entry is
  // written (as under kill -9): nothing in log/ names the removal.
  auto injector = std::make_shared<targets::FaultInjector>();
  auto a = Repository::open(targets::make_fault_injecting_target(h.metered(), injector),
                            {"secret", std::string(kInMemoryCatalog)});
  injector->set_rules(
      {{.when = {.op = targets::TargetOp::kPut, .prefix = "log/"}, .persistence = Persistence::kPermanent}}, 1);
  const size_t entries = list_log_keys(h.a->target()).size();
  RetentionPolicy keep_one;
  keep_one.last = 1;
  REQUIRE_THROWS(forget(*a, {}, keep_one, GroupBy::kNone, false));
  REQUIRE_FALSE(h.a->target().head(snapshot_key(old.id)));
  REQUIRE_FALSE(h.a->target().head(snapshot_key(older.id)));
  REQUIRE(list_log_keys(h.a->target()).size() == entries);

  // b's next command follows without a full sync and lists only what is there.
  Requests cost = Hosts::cost(*h.b, [&] { h.b->follow_log(); });
  CHECK(snapshot_ids(*h.b) == std::set<Id>{kept.id});
  CHECK(cost.list == 2);  // log/ and snapshots/
  CHECK(cost.reads() == 0);
  CHECK(h.b->warnings().empty());
}

TEST_CASE("a backup killed before its log entry reaches other hosts' catalogs at their next follow", "[changelog]") {
  Hosts h;
  catalog::SnapshotRecord first = h.backup(*h.a, "first", 50'000, 1);
  h.b->follow_log();
  auto c = h.open_host();
  c->follow_log();
  // Host a's backup stores its packs and its snapshot, then dies before
  // its entry is written (as under kill -9).
  auto injector = std::make_shared<targets::FaultInjector>();
  auto a = Repository::open(targets::make_fault_injecting_target(h.metered(), injector),
                            {"secret", std::string(kInMemoryCatalog)});
  injector->set_rules(
      {{.when = {.op = targets::TargetOp::kPut, .prefix = "log/"}, .persistence = Persistence::kPermanent}}, 1);
  REQUIRE_THROWS(h.backup(*a, "unlogged", 200'000, 2));
  std::set<Id> on_target;
  for (const Id& id : list_object_ids(h.a->target(), "snapshots/")) on_target.insert(id);
  REQUIRE(on_target.size() == 2);

  // b lists it (and restores from its packs) after one follow; a damaged
  // snapshot, which no sync can read, costs one full sync, not one per follow.
  h.b->follow_log();
  CHECK(snapshot_ids(*h.b) == on_target);
  CHECK(pack_ids(*h.b) == pack_ids(*a));
  CHECK(Hosts::cost(*h.b, [&] { h.b->follow_log(); }).list == 2);
  const Id damaged = *on_target.rbegin() == first.id ? *on_target.begin() : *on_target.rbegin();
  std::map<std::string, Bytes> objects = h.store->objects();
  objects[snapshot_key(damaged)] = Bytes(100, 0x5A);
  h.store->set_objects(std::move(objects));
  c->follow_log();
  CHECK(snapshot_ids(*c) == std::set<Id>{first.id});
  CHECK(Hosts::cost(*c, [&] { c->follow_log(); }).list == 2);
}

namespace {

// Runs `after` once when a listing of snapshots/ has ended, before the
// caller sees it: what another process does while a catalog follows the log.
class AfterSnapshotListing final : public targets::TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;
  void list(const std::string& prefix, const std::function<void(const targets::ObjectInfo&)>& fn) override {
    TargetDecorator::list(prefix, fn);
    if (prefix == "snapshots/" && after) std::exchange(after, nullptr)();
  }
  std::function<void()> after;
};

}  // namespace

TEST_CASE("following the log drops no snapshot a backup adds to the catalog while snapshots/ is listed",
          "[changelog]") {
  Hosts h;
  catalog::SnapshotRecord first = h.backup(*h.a, "first", 50'000, 1);
  // Two processes of host b on one catalog file: one follows the log, the
  // other backs up meanwhile, adding its snapshot after the listing.
  const std::string catalog = h.dir.file("b.db");
  auto hooked = std::make_unique<AfterSnapshotListing>(h.metered());
  AfterSnapshotListing& target = *hooked;
  auto follower = Repository::open(std::move(hooked), {"secret", catalog});
  auto other = Repository::open(h.metered(), {"secret", catalog});
  catalog::SnapshotRecord added;
  target.after = [&] { added = h.backup(*other, "during", 50'000, 2); };
  follower->follow_log();
  REQUIRE_FALSE(target.after);  // the backup ran within the listing's window
  CHECK(snapshot_ids(*follower) == std::set<Id>{first.id, added.id});
}

TEST_CASE("a backup logs the packs a killed run of its host left, so other hosts follow without a full sync",
          "[changelog]") {
  Hosts h;
  // Host a's runs; the first dies after its packs are stored, before its snapshot (as under kill -9).
  auto injector = std::make_shared<targets::FaultInjector>();
  auto a = Repository::open(targets::make_fault_injecting_target(h.metered(), injector),
                            {"secret", std::string(kInMemoryCatalog)});
  injector->set_rules({{.when = {.op = targets::TargetOp::kPut, .prefix = "snapshots/"},
                        .persistence = Persistence::kPermanent}},
                      1);
  REQUIRE_THROWS(h.backup(*a, "data", 400'000, 3));
  const std::set<Id> left = pack_ids(*a);
  REQUIRE(left.size() >= 4);
  h.b->follow_log();
  REQUIRE(pack_ids(*h.b).empty());  // nothing logged them

  injector->set_rules({}, 1);
  catalog::SnapshotRecord snap = h.backup(*a, "data", 400'000, 3);
  CHECK(snap.stats.chunks_added == 0);  // every chunk reused from the killed run's packs
  Requests cost = Hosts::cost(*h.b, [&] { h.b->follow_log(); });
  CHECK(cost.list <= 3);  // log/, snapshots/, and condemned/ as packs were added: no full sync
  CHECK(pack_ids(*h.b) == pack_ids(*a));
  CHECK(h.b->catalog().blob_count() == a->catalog().blob_count());
  CHECK(a->catalog().unlogged_packs().empty());
}

TEST_CASE("a catalog that missed compacted entries syncs in full", "[changelog]") {
  Hosts h;
  h.backup(*h.a, "one", 100'000, 1);
  h.b->follow_log();
  catalog::SnapshotRecord missed = h.backup(*h.a, "two", 100'000, 2);
  // A prune an hour later compacts every entry, the one b has not applied among them.
  PruneOptions o;
  o.log_retention = std::chrono::seconds(0);
  o.clock = [] { return unix_now() + 3600; };
  prune(*h.a, o);
  REQUIRE(list_log_keys(h.a->target()).size() == 1);  // the compaction's own entry

  Requests cost = Hosts::cost(*h.b, [&] { h.b->follow_log(); });
  CHECK(cost.list >= 4);  // fell back to listing everything
  CHECK(snapshot_ids(*h.b).count(missed.id));
  CHECK(pack_ids(*h.b) == pack_ids(*h.a));
  // And follows cheaply again afterwards.
  CHECK(Hosts::cost(*h.b, [&] { h.b->follow_log(); }).list == 2);
}

TEST_CASE("a read that finds its pack gone re-syncs and reads the blob's other copy", "[changelog]") {
  Hosts h;
  Bytes raw = test::random_bytes(5000, 7);
  Id blob = keyed_id(h.a->keys().id, raw);  // reads check it
  // Both hosts store the blob (concurrent backups); b also learns of a's copy
  // but keeps indexing its own first one.
  Id pack_a = Hosts::store_blob(*h.a, blob, raw);
  Id pack_b = Hosts::store_blob(*h.b, blob, raw);
  h.b->sync_catalog();
  REQUIRE(h.b->catalog().find_blob(blob)->pack == pack_b);
  REQUIRE(h.b->catalog().has_pack(pack_a));

  // b's copy goes behind its back, unlogged (as a crashed prune would leave it).
  h.a->target().remove(pack_key(pack_b));
  CHECK(h.b->read_blob(blob) == raw);
  CHECK(h.b->catalog().find_blob(blob)->pack == pack_a);
  CHECK_FALSE(h.b->catalog().has_pack(pack_b));

  // A blob whose only copy is gone still fails, naming the pack.
  Id lonely = Id::random();
  Id pack_c = Hosts::store_blob(*h.b, lonely, raw);
  h.a->target().remove(pack_key(pack_c));
  CHECK_THROWS_AS(h.b->read_blob(lonely), Error);
}

TEST_CASE("a log entry that does not open is an integrity error naming it", "[changelog]") {
  Hosts h;
  h.backup(*h.a, "one", 10'000, 1);
  std::vector<std::string> keys = list_log_keys(h.a->target());
  REQUIRE(keys.size() == 1);
  Bytes body = h.a->target().get(keys[0]);
  body[body.size() / 2] ^= 1;
  h.a->target().put(keys[0], body);
  try {
    read_log_entry(h.a->target(), h.a->keys().data, keys[0]);
    FAIL("a damaged entry opened");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kIntegrity);
    CHECK_THAT(e.what(), Catch::Contains(keys[0]));
  }
}
