#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "catalog/catalog.h"
#include "catalog/sqlite.h"
#include "tests/unit/temp_dir.h"
#include "util/error.h"

using namespace keel;
using namespace keel::catalog;

namespace {

constexpr int kLatestSchema = 8;

using keel::test::TempDir;

PackRecord make_pack(int64_t created = 1700000000) {
  PackRecord p;
  p.id = Id::random();
  p.size = 123456789;
  p.xxh3_128 = Bytes{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  p.created_unix = created;
  p.vouched = true;
  return p;
}

BlobRecord make_blob(uint64_t offset, BlobType type = BlobType::kData) {
  BlobRecord b;
  b.id = Id::random();
  b.type = type;
  b.offset = offset;
  b.stored_length = static_cast<uint32_t>(1000 + offset);
  b.raw_length = static_cast<uint32_t>(2000 + offset);
  b.xxh3 = 0x0123456789abcdefULL ^ offset;
  return b;
}

void check_same(const BlobRecord& a, const BlobRecord& b) {
  CHECK(a.id == b.id);
  CHECK(a.type == b.type);
  CHECK(a.offset == b.offset);
  CHECK(a.stored_length == b.stored_length);
  CHECK(a.raw_length == b.raw_length);
  CHECK(a.xxh3 == b.xxh3);
}

void check_same(const SnapshotRecord& a, const SnapshotRecord& b) {
  CHECK(a.id == b.id);
  CHECK(a.time_ns == b.time_ns);
  CHECK(a.host == b.host);
  CHECK(a.username == b.username);
  CHECK(a.paths == b.paths);
  CHECK(a.tags == b.tags);
  CHECK(a.parent == b.parent);
  CHECK(a.root == b.root);
  CHECK(a.stats.files == b.stats.files);
  CHECK(a.stats.dirs == b.stats.dirs);
  CHECK(a.stats.bytes == b.stats.bytes);
  CHECK(a.stats.bytes_read == b.stats.bytes_read);
  CHECK(a.stats.bytes_added == b.stats.bytes_added);
  CHECK(a.stats.chunks_added == b.stats.chunks_added);
  CHECK(a.stats.errors == b.stats.errors);
  CHECK(a.stats.duration_ms == b.stats.duration_ms);
}

DrillRecord make_drill(int64_t started_ns) {
  DrillRecord d;
  d.started_ns = started_ns;
  d.snapshot = Id::random();
  d.seconds = 12.5;
  d.first_file_seconds = 0.25;
  d.files = 40;
  d.bytes = 1ull << 40;
  d.errors = 0;
  d.rpo_seen_seconds = 3600.5;
  d.sample = 1.0;
  d.seed = 42;
  d.report_json = R"({"snapshot":"x"})";
  return d;
}

void check_same(const DrillRecord& a, const DrillRecord& b) {
  CHECK(a.started_ns == b.started_ns);
  CHECK(a.snapshot == b.snapshot);
  CHECK(a.seconds == b.seconds);
  CHECK(a.first_file_seconds == b.first_file_seconds);
  CHECK(a.files == b.files);
  CHECK(a.bytes == b.bytes);
  CHECK(a.errors == b.errors);
  CHECK(a.rto_seconds == b.rto_seconds);
  CHECK(a.rpo_seconds == b.rpo_seconds);
  CHECK(a.rto_met == b.rto_met);
  CHECK(a.rpo_met == b.rpo_met);
  CHECK(a.rpo_seen_seconds == b.rpo_seen_seconds);
  CHECK(a.verify_only == b.verify_only);
  CHECK(a.sample == b.sample);
  CHECK(a.seed == b.seed);
  CHECK(a.report_json == b.report_json);
}

JobRunRecord make_job_run(const std::string& job, int64_t started_ns) {
  JobRunRecord r;
  r.job = job;
  r.started_ns = started_ns;
  return r;
}

void check_same(const JobRunRecord& a, const JobRunRecord& b) {
  CHECK(a.id == b.id);
  CHECK(a.job == b.job);
  CHECK(a.started_ns == b.started_ns);
  CHECK(a.ended_ns == b.ended_ns);
  CHECK(a.outcome == b.outcome);
  CHECK(a.snapshot == b.snapshot);
  CHECK(a.files == b.files);
  CHECK(a.bytes_read == b.bytes_read);
  CHECK(a.bytes_added == b.bytes_added);
  CHECK(a.errors == b.errors);
  CHECK(a.message == b.message);
}

SnapshotRecord make_snapshot(int64_t time_ns) {
  SnapshotRecord s;
  s.id = Id::random();
  s.time_ns = time_ns;
  s.host = "host-a";
  s.username = "alice";
  s.paths = {"/home/alice"};
  s.root = Id::random();
  return s;
}

}  // namespace

TEST_CASE("catalog open creates its directory and migrates; reopen is idempotent", "[catalog]") {
  TempDir dir;
  std::string path = dir.file("nested/deeper/catalog.db");
  Id pack_id;
  {
    auto cat = Catalog::open(path);
    CHECK(std::filesystem::exists(path));
    CHECK(cat->schema_version() == kLatestSchema);
    PackRecord pack = make_pack();
    pack_id = pack.id;
    cat->add_pack(pack, {});
    cat->set_meta("repository", "r1");
  }
  auto cat = Catalog::open(path);
  CHECK(cat->schema_version() == kLatestSchema);
  CHECK(cat->has_pack(pack_id));
  CHECK(cat->get_meta("repository") == "r1");
}

TEST_CASE("an in-memory catalog is migrated, usable and private to its object", "[catalog]") {
  auto a = Catalog::open_in_memory();
  auto b = Catalog::open_in_memory();
  CHECK(a->schema_version() == kLatestSchema);
  PackRecord pack = make_pack();
  a->add_pack(pack, std::vector<BlobRecord>{make_blob(0)});
  a->transaction([&] { a->set_meta("k", "v"); });
  CHECK(a->has_pack(pack.id));
  CHECK(a->blob_count() == 1);
  CHECK(a->get_meta("k") == "v");
  CHECK_FALSE(b->has_pack(pack.id));
  CHECK(b->blob_count() == 0);
  TempDir dir;
  a->export_to(dir.file("copy.db"));
  CHECK(Catalog::open(dir.file("copy.db"))->has_pack(pack.id));
}

TEST_CASE("catalog migrates a version 1 database to the latest and keeps its data", "[catalog]") {
  TempDir dir;
  std::string path = dir.file("catalog.db");
  PackRecord pack = make_pack();
  BlobRecord blob = make_blob(64);
  SnapshotRecord snap = make_snapshot(7);
  {
    auto cat = Catalog::open(path);
    cat->set_meta("repository", "r1");
    cat->add_pack(pack, std::vector{blob});
    cat->add_snapshot(snap);
  }
  {
    // Version 1 is the latest without the history tables and the condemned, retain_until and vouched columns.
    Database db(path);
    db.exec("DROP TABLE drills; DROP TABLE job_runs; DROP TABLE unlogged_packs; ALTER TABLE packs DROP COLUMN condemned;"
            " ALTER TABLE packs DROP COLUMN retain_until; ALTER TABLE packs DROP COLUMN vouched; PRAGMA user_version = 1");
  }
  auto cat = Catalog::open(path);
  CHECK(cat->schema_version() == kLatestSchema);
  CHECK(cat->get_meta("repository") == "r1");
  CHECK(cat->has_pack(pack.id));
  auto found = cat->find_blob(blob.id);
  REQUIRE(found.has_value());
  check_same(found->blob, blob);
  auto got = cat->get_snapshot(snap.id);
  REQUIRE(got.has_value());
  check_same(*got, snap);
  CHECK(cat->list_drills().empty());
  cat->add_drill(make_drill(1));
  CHECK(cat->list_drills().size() == 1);
  CHECK_FALSE(cat->list_packs().at(0).condemned_unix.has_value());
  CHECK(cat->list_packs().at(0).vouched);  // packs indexed before vouching stay trusted as they were
  CHECK(cat->list_job_runs("nightly").empty());
}

TEST_CASE("catalog refuses a schema newer than it knows", "[catalog]") {
  TempDir dir;
  std::string path = dir.file("catalog.db");
  Catalog::open(path).reset();
  {
    Database db(path);
    db.exec("PRAGMA user_version = 99");
  }
  try {
    Catalog::open(path);
    FAIL("opened a catalog with schema version 99");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kTargetIo);
    CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("99"));
  }
}

TEST_CASE("catalog open fails with the path when it cannot create the file", "[catalog]") {
  TempDir dir;
  std::string blocker = dir.file("not-a-dir");
  { std::ofstream(blocker) << "x"; }
  std::string path = blocker + "/catalog.db";
  try {
    Catalog::open(path);
    FAIL("opened a catalog under a regular file");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kTargetIo);
    CHECK_THAT(e.what(), Catch::Contains(path));
  }
}

TEST_CASE("catalog meta get and set", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  CHECK_FALSE(cat->get_meta("target").has_value());
  cat->set_meta("target", "local:/srv/backup");
  CHECK(cat->get_meta("target") == "local:/srv/backup");
  cat->set_meta("target", "");
  CHECK(cat->get_meta("target") == "");
  CHECK_FALSE(cat->get_meta("other").has_value());
}

TEST_CASE("catalog indexes packs and their blobs", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  PackRecord pack = make_pack();
  // Out of offset order: blobs_in_pack returns them in pack order.
  std::vector<BlobRecord> blobs = {make_blob(500), make_blob(0), make_blob(250, BlobType::kTree)};
  CHECK_FALSE(cat->has_pack(pack.id));
  cat->add_pack(pack, blobs);
  CHECK(cat->has_pack(pack.id));
  CHECK(cat->blob_count() == 3);

  for (const BlobRecord& b : blobs) {
    auto found = cat->find_blob(b.id);
    REQUIRE(found.has_value());
    CHECK(found->pack == pack.id);
    check_same(found->blob, b);
  }
  CHECK_FALSE(cat->find_blob(Id::random()).has_value());

  // Many at once: the same answers, in the order asked, misses included.
  std::vector<Id> ask = {blobs[2].id, Id::random(), blobs[0].id, blobs[1].id};
  auto many = cat->find_blobs(ask);
  REQUIRE(many.size() == 4);
  CHECK_FALSE(many[1].has_value());
  for (size_t i : {0, 2, 3}) {
    REQUIRE(many[i].has_value());
    CHECK(many[i]->pack == pack.id);
    CHECK(many[i]->blob.id == ask[i]);
  }
  CHECK(cat->find_blobs({}).empty());
  // Inside a caller's transaction the lookups join it.
  cat->transaction([&] { CHECK(cat->find_blobs(ask)[3]->blob.id == blobs[1].id); });

  auto in_pack = cat->blobs_in_pack(pack.id);
  REQUIRE(in_pack.size() == 3);
  check_same(in_pack[0], blobs[1]);
  check_same(in_pack[1], blobs[2]);
  check_same(in_pack[2], blobs[0]);
  CHECK(cat->blobs_in_pack(Id::random()).empty());

  auto packs = cat->list_packs();
  REQUIRE(packs.size() == 1);
  CHECK(packs[0].id == pack.id);
  CHECK(packs[0].size == pack.size);
  CHECK(packs[0].xxh3_128 == pack.xxh3_128);
  CHECK(packs[0].created_unix == pack.created_unix);
}

TEST_CASE("catalog keeps every location of a blob and reads the first", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  BlobRecord shared = make_blob(10);
  BlobRecord shared_again = shared;
  shared_again.offset = 999;
  PackRecord first = make_pack(), second = make_pack();
  cat->add_pack(first, std::vector{shared});
  cat->add_pack(second, std::vector{shared_again, make_blob(20)});

  CHECK(cat->blob_count() == 3);
  CHECK(cat->blobs_stored_more_than_once() == 1);
  auto found = cat->find_blob(shared.id);
  REQUIRE(found.has_value());
  CHECK(found->pack == first.id);
  CHECK(found->blob.offset == 10);
  // Each pack lists what its own header holds.
  auto in_second = cat->blobs_in_pack(second.id);
  REQUIRE(in_second.size() == 2);
  CHECK(in_second[0].offset == 20);
  CHECK(in_second[1].offset == 999);

  // Removing the first pack leaves the other copy to read.
  cat->remove_pack(first.id);
  CHECK(cat->find_blob(shared.id)->pack == second.id);
  CHECK(cat->find_blob(shared.id)->blob.offset == 999);
  CHECK(cat->blobs_stored_more_than_once() == 0);
}

TEST_CASE("catalog for_each_usable_blob visits every blob once", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  std::set<Id> data, trees, vouched;
  for (int p = 0; p < 3; ++p) {
    std::vector<BlobRecord> blobs;
    for (uint64_t i = 0; i < 10; ++i) {
      blobs.push_back(make_blob(i * 100, i % 3 == 0 ? BlobType::kTree : BlobType::kData));
      (blobs.back().type == BlobType::kTree ? trees : data).insert(blobs.back().id);
      if (p != 1) vouched.insert(blobs.back().id);
    }
    PackRecord pack = make_pack();
    pack.vouched = p != 1;
    cat->add_pack(pack, blobs);
    CHECK(cat->find_pack(pack.id)->vouched == pack.vouched);
  }
  std::set<Id> seen_data, seen_trees;
  size_t visits = 0;
  cat->for_each_usable_blob(
      [&](const Id& id, BlobType type) {
        ++visits;
        (type == BlobType::kTree ? seen_trees : seen_data).insert(id);
        // Calling back into the catalog from the visitor is allowed.
        CHECK(cat->find_blob(id).has_value());
      },
      false);
  CHECK(visits == 30);
  CHECK(seen_data == data);
  CHECK(seen_trees == trees);

  // Only the packs vouched for (engine/pack_vouch.h), for a full key of format 2.
  std::set<Id> seen_vouched;
  cat->for_each_usable_blob([&](const Id& id, BlobType) { seen_vouched.insert(id); }, true);
  CHECK(seen_vouched == vouched);
  CHECK(!cat->find_pack(Id::random()));
}

TEST_CASE("catalog remove_pack drops the pack and its blobs", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  PackRecord gone = make_pack(), kept = make_pack();
  BlobRecord gone_blob = make_blob(0), kept_blob = make_blob(0);
  cat->add_pack(gone, std::vector{gone_blob, make_blob(100)});
  cat->add_pack(kept, std::vector{kept_blob});
  cat->remove_pack(gone.id);
  CHECK_FALSE(cat->has_pack(gone.id));
  CHECK(cat->has_pack(kept.id));
  CHECK_FALSE(cat->find_blob(gone_blob.id).has_value());
  CHECK(cat->find_blob(kept_blob.id).has_value());
  CHECK(cat->blob_count() == 1);
  CHECK(cat->blobs_in_pack(gone.id).empty());
  CHECK(cat->list_packs().size() == 1);
  cat->remove_pack(Id::random());  // unknown: nothing to do
  CHECK(cat->blob_count() == 1);
}

TEST_CASE("catalog remove_pack drops the cached bodies of its trees only", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  BlobRecord tree = make_blob(0, BlobType::kTree), other_tree = make_blob(0, BlobType::kTree);
  PackRecord gone = make_pack(), kept = make_pack();
  cat->add_pack(gone, std::vector{tree});
  cat->add_pack(kept, std::vector{other_tree});
  cat->put_tree(tree.id, Bytes{1, 2, 3});
  cat->put_tree(other_tree.id, Bytes{4, 5});
  cat->remove_pack(gone.id);
  CHECK_FALSE(cat->get_tree(tree.id).has_value());
  CHECK(cat->get_tree(other_tree.id) == Bytes{4, 5});

  // A tree another pack holds too keeps its cached body.
  PackRecord copy = make_pack();
  cat->add_pack(copy, std::vector{other_tree});
  cat->remove_pack(kept.id);
  CHECK(cat->get_tree(other_tree.id) == Bytes{4, 5});
}

TEST_CASE("catalog condemned packs: status, dedupe index, and blobs moving to packs in use", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  PackRecord old_pack = make_pack(), copy = make_pack();
  BlobRecord shared = make_blob(0), only_old = make_blob(100);
  cat->add_pack(old_pack, std::vector{shared, only_old});

  auto usable = [&] {
    std::set<Id> ids;
    cat->for_each_usable_blob([&](const Id& id, BlobType) { ids.insert(id); }, true);
    return ids;
  };
  CHECK(usable() == std::set<Id>{shared.id, only_old.id});

  cat->set_condemned(old_pack.id, 1700000123);
  auto packs = cat->list_packs();
  REQUIRE(packs.size() == 1);
  CHECK(packs[0].condemned_unix == std::optional<int64_t>(1700000123));
  CHECK(usable().empty());
  // Condemned blobs can still be read until the pack is deleted.
  CHECK(cat->find_blob(shared.id)->pack == old_pack.id);

  // A copy in a pack in use is read instead; the blob is usable again.
  BlobRecord moved = shared;
  moved.offset = 7;
  cat->add_pack(copy, std::vector{moved});
  CHECK(cat->find_blob(shared.id)->pack == copy.id);
  CHECK(cat->find_blob(shared.id)->blob.offset == 7);
  CHECK(cat->find_blob(only_old.id)->pack == old_pack.id);
  CHECK(usable() == std::set<Id>{shared.id});
  CHECK(cat->blobs_in_pack(old_pack.id).size() == 2);  // its own copy stays indexed

  // A condemned pack is never read before a pack in use...
  PackRecord condemned_copy = make_pack();
  condemned_copy.condemned_unix = 1700000200;
  cat->add_pack(condemned_copy, std::vector{shared});
  CHECK(cat->find_blob(shared.id)->pack == copy.id);
  // ... nor is a later pack in use before an earlier one.
  cat->add_pack(make_pack(), std::vector{shared});
  CHECK(cat->find_blob(shared.id)->pack == copy.id);

  cat->set_condemned(old_pack.id, std::nullopt);
  CHECK(usable() == std::set<Id>{shared.id, only_old.id});
  CHECK(cat->find_blob(shared.id)->pack == old_pack.id);  // indexed first, in use again
  CHECK(cat->blobs_in_pack(old_pack.id).size() == 2);
}

TEST_CASE("catalog for_each_blob_location visits every blob in id order with its pack", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  std::map<Id, Id> pack_of;
  for (int p = 0; p < 4; ++p) {
    PackRecord pack = make_pack();
    if (p == 2) pack.condemned_unix = 1;  // condemned blobs are listed too
    std::vector<BlobRecord> blobs;
    for (uint64_t i = 0; i < 25; ++i) {
      blobs.push_back(make_blob(i * 10));
      pack_of[blobs.back().id] = pack.id;
    }
    cat->add_pack(pack, blobs);
  }
  std::vector<Id> order;
  cat->for_each_blob_location([&](const BlobLocation& loc) {
    order.push_back(loc.blob.id);
    CHECK(pack_of.at(loc.blob.id) == loc.pack);
    CHECK(loc.blob.stored_length == 1000 + loc.blob.offset);
  });
  CHECK(order.size() == 100);
  CHECK(std::is_sorted(order.begin(), order.end()));
  cat->limit_cache(1 << 20);  // smaller cache, same answers
  CHECK(cat->blob_count() == 100);
}

TEST_CASE("catalog stores trees", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  Id id = Id::random(), empty = Id::random();
  Bytes body(5000);
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<uint8_t>(i * 7);
  cat->put_tree(id, body);
  cat->put_tree(id, body);  // again: no error
  cat->put_tree(empty, {});
  CHECK(cat->get_tree(id) == body);
  auto got_empty = cat->get_tree(empty);
  REQUIRE(got_empty.has_value());
  CHECK(got_empty->empty());
  CHECK_FALSE(cat->get_tree(Id::random()).has_value());
}

TEST_CASE("catalog snapshots round-trip every field", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  SnapshotRecord full;
  full.id = Id::random();
  full.time_ns = 1'700'000'000'123'456'789;
  full.host = "höst name";
  full.username = "bob";
  full.paths = {"/home/bob/with space", "/tmp/new\nline", "/données/日本語", std::string("/raw\xff\x01\x7f", 8), ""};
  full.tags = {"daily", "tag with space"};
  full.parent = Id::random();
  full.root = Id::random();
  full.stats = {1, 2, UINT64_MAX, 4, 5, 6, 7, -8};

  SnapshotRecord bare = make_snapshot(5);
  bare.paths.clear();
  REQUIRE_FALSE(bare.parent.has_value());

  cat->add_snapshot(full);
  cat->add_snapshot(bare);
  auto got_full = cat->get_snapshot(full.id);
  REQUIRE(got_full.has_value());
  check_same(*got_full, full);
  auto got_bare = cat->get_snapshot(bare.id);
  REQUIRE(got_bare.has_value());
  check_same(*got_bare, bare);
  CHECK_FALSE(got_bare->parent.has_value());
  CHECK_FALSE(cat->get_snapshot(Id::random()).has_value());

  // Same id again replaces it.
  full.tags = {"monthly"};
  full.parent.reset();
  cat->add_snapshot(full);
  got_full = cat->get_snapshot(full.id);
  REQUIRE(got_full.has_value());
  check_same(*got_full, full);
  CHECK(cat->list_snapshots().size() == 2);
}

TEST_CASE("catalog lists snapshots by time then id, and removes them", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  std::vector<SnapshotRecord> snaps = {make_snapshot(30), make_snapshot(10), make_snapshot(20), make_snapshot(20)};
  // Ids out of time order, so ordering by id alone would show.
  for (size_t i = 0; i < snaps.size(); ++i) snaps[i].id.bytes[0] = static_cast<uint8_t>(i);
  for (const auto& s : snaps) cat->add_snapshot(s);
  std::vector<SnapshotRecord> expected = snaps;
  std::sort(expected.begin(), expected.end(),
            [](const SnapshotRecord& a, const SnapshotRecord& b) { return std::tie(a.time_ns, a.id) < std::tie(b.time_ns, b.id); });
  auto listed = cat->list_snapshots();
  REQUIRE(listed.size() == expected.size());
  for (size_t i = 0; i < listed.size(); ++i) check_same(listed[i], expected[i]);

  cat->remove_snapshot(expected[1].id);
  listed = cat->list_snapshots();
  REQUIRE(listed.size() == 3);
  CHECK(listed[0].id == expected[0].id);
  CHECK(listed[1].id == expected[2].id);
  CHECK(listed[2].id == expected[3].id);
  CHECK_FALSE(cat->get_snapshot(expected[1].id).has_value());
}

TEST_CASE("catalog clear_index drops the index but keeps meta, drill and job run history", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  cat->set_meta("repository", "r1");
  PackRecord pack = make_pack();
  cat->add_pack(pack, std::vector{make_blob(0)});
  Id tree = Id::random();
  cat->put_tree(tree, as_bytes("tree"));
  cat->add_snapshot(make_snapshot(1));
  DrillRecord drill = make_drill(1);
  cat->add_drill(drill);
  JobRunRecord run = make_job_run("nightly", 5);
  run.id = cat->add_job_run(run);
  cat->clear_index();
  CHECK(cat->blob_count() == 0);
  CHECK(cat->list_packs().empty());
  CHECK_FALSE(cat->get_tree(tree).has_value());
  CHECK(cat->list_snapshots().empty());
  CHECK(cat->get_meta("repository") == "r1");
  auto drills = cat->list_drills();  // history
  REQUIRE(drills.size() == 1);
  check_same(drills[0], drill);
  auto runs = cat->list_job_runs("nightly");
  REQUIRE(runs.size() == 1);
  check_same(runs[0], run);
}

TEST_CASE("catalog job runs: started, finished, listed per job oldest first, newest N", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  std::vector<JobRunRecord> nightly;
  for (int i = 0; i < 4; ++i) {
    JobRunRecord r = make_job_run("nightly", 1000 + i);
    r.id = cat->add_job_run(r);
    nightly.push_back(r);
    JobRunRecord other = make_job_run("hourly", 1000 + i);
    other.id = cat->add_job_run(other);
  }
  CHECK(nightly[0].outcome == JobOutcome::kRunning);
  JobRunRecord& done = nightly[2];
  done.ended_ns = 2000;
  done.outcome = JobOutcome::kPartial;
  done.snapshot = Id::random();
  done.files = 12;
  done.bytes_read = 1ull << 40;
  done.bytes_added = UINT64_MAX;
  done.errors = 2;
  done.message = "2 items could not be read: \"/odd\n\"";
  cat->finish_job_run(done);

  auto runs = cat->list_job_runs("nightly");
  REQUIRE(runs.size() == 4);
  for (size_t i = 0; i < runs.size(); ++i) check_same(runs[i], nightly[i]);
  CHECK_FALSE(runs[0].snapshot.has_value());
  auto newest = cat->list_job_runs("nightly", 2);
  REQUIRE(newest.size() == 2);
  check_same(newest[0], nightly[2]);
  check_same(newest[1], nightly[3]);
  CHECK(cat->list_job_runs("hourly").size() == 4);
  CHECK(cat->list_job_runs("none").empty());

  JobRunRecord missing = make_job_run("nightly", 1);
  missing.id = 9999;
  CHECK_THROWS_AS(cat->finish_job_run(missing), Error);
}

TEST_CASE("catalog job outcome names round-trip", "[catalog]") {
  for (JobOutcome o : {JobOutcome::kRunning, JobOutcome::kSuccess, JobOutcome::kPartial, JobOutcome::kFailed,
                       JobOutcome::kRefused, JobOutcome::kInterrupted}) {
    CHECK(parse_job_outcome(job_outcome_name(o)) == o);
  }
  CHECK(job_outcome_name(JobOutcome::kPartial) == "partial");
  CHECK_THROWS_AS(parse_job_outcome("fine"), Error);
}

TEST_CASE("catalog drills round-trip every field and list oldest first", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  DrillRecord late = make_drill(300);
  late.rto_seconds = 1800;
  late.rpo_seconds = 86400.5;
  late.rto_met = false;
  late.rpo_met = false;
  late.errors = 3;
  late.first_file_seconds = -1;
  late.verify_only = true;
  late.sample = 0.1;
  late.seed = UINT64_MAX;
  late.rpo_seen_seconds = std::numeric_limits<double>::infinity();  // no complete snapshot
  late.report_json = std::string("{\"path\":\"/odd\\n\u00e9\"}");
  DrillRecord early = make_drill(100), middle = make_drill(200);

  int64_t late_id = cat->add_drill(late);
  int64_t early_id = cat->add_drill(early);
  int64_t middle_id = cat->add_drill(middle);
  CHECK(late_id != early_id);
  CHECK(early_id != middle_id);

  auto drills = cat->list_drills();
  REQUIRE(drills.size() == 3);
  CHECK(drills[0].id == early_id);
  CHECK(drills[1].id == middle_id);
  CHECK(drills[2].id == late_id);
  check_same(drills[0], early);
  check_same(drills[1], middle);
  check_same(drills[2], late);
  CHECK_FALSE(drills[0].rto_seconds.has_value());
  CHECK_FALSE(drills[0].rpo_seconds.has_value());
}

TEST_CASE("catalog transaction rolls back everything when it throws", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  PackRecord pack = make_pack();
  BlobRecord blob = make_blob(0);
  Id tree = Id::random();
  SnapshotRecord snap = make_snapshot(1);
  CHECK_THROWS_WITH(cat->transaction([&] {
    cat->set_meta("key", "value");
    cat->add_pack(pack, std::vector{blob});
    cat->put_tree(tree, as_bytes("body"));
    cat->add_snapshot(snap);
    throw std::runtime_error("stop");
  }),
                    "stop");
  CHECK_FALSE(cat->get_meta("key").has_value());
  CHECK_FALSE(cat->has_pack(pack.id));
  CHECK_FALSE(cat->find_blob(blob.id).has_value());
  CHECK(cat->blob_count() == 0);
  CHECK_FALSE(cat->get_tree(tree).has_value());
  CHECK(cat->list_snapshots().empty());

  // The catalog is usable afterwards.
  cat->transaction([&] { cat->add_pack(pack, std::vector{blob}); });
  CHECK(cat->find_blob(blob.id).has_value());
}

TEST_CASE("catalog nested transactions join the outer one", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  PackRecord a = make_pack(), b = make_pack(), c = make_pack();

  SECTION("the outer commit keeps the inner work") {
    cat->transaction([&] {
      cat->add_pack(a, {});
      cat->transaction([&] { cat->add_pack(b, {}); });
    });
    CHECK(cat->has_pack(a.id));
    CHECK(cat->has_pack(b.id));
  }
  SECTION("the outer rollback undoes committed inner work") {
    CHECK_THROWS(cat->transaction([&] {
      cat->transaction([&] { cat->add_pack(a, {}); });
      cat->add_pack(b, {});
      throw std::runtime_error("outer fails");
    }));
    CHECK(cat->list_packs().empty());
  }
  SECTION("an inner failure the outer catches undoes only the inner part") {
    cat->transaction([&] {
      cat->add_pack(a, {});
      try {
        cat->transaction([&] {
          cat->add_pack(b, {});
          throw std::runtime_error("inner fails");
        });
      } catch (const std::runtime_error&) {
      }
      cat->add_pack(c, {});
    });
    CHECK(cat->has_pack(a.id));
    CHECK_FALSE(cat->has_pack(b.id));
    CHECK(cat->has_pack(c.id));
  }
}

TEST_CASE("catalog connections on one file see each other's commits", "[catalog]") {
  TempDir dir;
  std::string path = dir.file("catalog.db");
  auto first = Catalog::open(path);
  auto second = Catalog::open(path);
  PackRecord pack = make_pack();
  BlobRecord blob = make_blob(7);

  first->transaction([&] {
    first->add_pack(pack, std::vector{blob});
    CHECK_FALSE(second->has_pack(pack.id));  // not committed yet
  });
  CHECK(second->has_pack(pack.id));
  auto found = second->find_blob(blob.id);
  REQUIRE(found.has_value());
  CHECK(found->pack == pack.id);

  second->set_meta("written-by", "second");
  CHECK(first->get_meta("written-by") == "second");
  second->remove_pack(pack.id);
  CHECK_FALSE(first->find_blob(blob.id).has_value());
}

TEST_CASE("catalog writer waits for another connection's transaction", "[catalog]") {
  TempDir dir;
  std::string path = dir.file("catalog.db");
  auto first = Catalog::open(path);
  auto second = Catalog::open(path);
  std::promise<void> holding;
  std::thread holder([&] {
    first->transaction([&] {
      first->set_meta("holder", "1");
      holding.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    });
  });
  holding.get_future().wait();
  // Blocks on the write lock until the holder commits, instead of failing.
  CHECK_NOTHROW(second->set_meta("waiter", "2"));
  holder.join();
  CHECK(second->get_meta("holder") == "1");
  CHECK(first->get_meta("waiter") == "2");
}

TEST_CASE("catalog round-trips 64-bit values with the top bit set", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  PackRecord pack = make_pack();
  pack.size = 0x8000000000000001ULL;
  BlobRecord blob = make_blob(0);
  blob.xxh3 = 0xfedcba9876543210ULL;
  blob.offset = UINT64_MAX;
  blob.stored_length = UINT32_MAX;
  blob.raw_length = 0x80000000U;
  cat->add_pack(pack, std::vector{blob});
  auto found = cat->find_blob(blob.id);
  REQUIRE(found.has_value());
  check_same(found->blob, blob);
  CHECK(cat->list_packs().at(0).size == pack.size);
}

TEST_CASE("catalog serializes calls from several threads", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  constexpr int kThreads = 4, kPacksEach = 20, kBlobsEach = 10;
  std::atomic<int> missing{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        for (int p = 0; p < kPacksEach; ++p) {
          std::vector<BlobRecord> blobs;
          for (int b = 0; b < kBlobsEach; ++b) blobs.push_back(make_blob(b * 10));
          cat->transaction([&] {
            cat->add_pack(make_pack(), blobs);
            for (const auto& b : blobs) {
              if (!cat->find_blob(b.id)) ++missing;
            }
          });
        }
      } catch (const std::exception&) {
        ++failed;  // Catch2 assertions are not thread-safe; count instead
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failed == 0);
  CHECK(missing == 0);
  CHECK(cat->list_packs().size() == kThreads * kPacksEach);
  CHECK(cat->blob_count() == kThreads * kPacksEach * kBlobsEach);
}

// Run with --durations yes to see the time.
TEST_CASE("catalog add_pack of 100k blobs in one call", "[catalog]") {
  TempDir dir;
  auto cat = Catalog::open(dir.file("catalog.db"));
  std::vector<BlobRecord> blobs;
  blobs.reserve(100'000);
  for (uint64_t i = 0; i < 100'000; ++i) blobs.push_back(make_blob(i * 4096));
  PackRecord pack = make_pack();
  cat->add_pack(pack, blobs);
  CHECK(cat->blob_count() == 100'000);
  auto found = cat->find_blob(blobs[54'321].id);
  REQUIRE(found.has_value());
  check_same(found->blob, blobs[54'321]);
  CHECK(cat->blobs_in_pack(pack.id).size() == 100'000);
}
