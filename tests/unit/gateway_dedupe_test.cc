// Dedupe-mode buckets: the storage seam over a keel repository (round trip,
// ranges across chunk and segment boundaries, the empty object, dedupe of
// a re-upload, group commit, durability), and garbage collection with the
// gateway's versions and parts as roots.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/chunk_store.h"
#include "engine/repository.h"
#include "gateway/config.h"
#include "gateway/dedupe_storage.h"
#include "gateway/garbage_collection.h"
#include "gateway/metadata.h"
#include "targets/local/local_target.h"
#include "tests/unit/body_reading.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::gateway;

namespace {

using test::random_bytes;
using test::slice;

// A repository with small chunks (1-16 KiB) so that little data makes many.
struct Fixture {
  test::TempDir dir{"keel-gateway-dedupe"};

  Fixture() {
    engine::RepoConfig config;
    config.chunker = {1024, 4096, 16384};
    config.pack_size = 1 << 20;
    config.part_size = 64 << 10;
    engine::Repository::init(targets::local::open_local_target(repo_path(), true), config, {"secret", catalog_path()});
    std::ofstream(dir.file("password")) << "secret\n";
  }

  std::string repo_path() const { return dir.file("repo"); }
  std::string catalog_path() const { return dir.file("catalog.db"); }

  std::shared_ptr<engine::ChunkStore> open_store() {
    return std::make_shared<engine::ChunkStore>(
        engine::Repository::open(targets::local::open_local_target(repo_path(), false), {"secret", catalog_path()}));
  }

  GatewayConfig config() const {
    std::istringstream in("[server]\nlisten = 127.0.0.1:0\nstate_dir = " + dir.file("state") +
                          "\n[user:a]\naccess_key = x\nsecret_key = y\n[bucket:ddb]\nowner = a\nmode = dedupe\n"
                          "repository = " + repo_path() + "\npassword_file = " + dir.file("password") +
                          "\ncatalog = " + catalog_path() + "\n");
    return GatewayConfig::parse(in, "test.conf");
  }
};

// Writes `data` in uneven pieces, as a client body arrives.
std::string put(BucketStorage& storage, ByteView data) {
  auto writer = storage.create();
  for (size_t at = 0, step = 1; at < data.size(); step = step * 3 % 70001 + 1) {
    const size_t n = std::min(step, data.size() - at);
    writer->write(data.subspan(at, n));
    at += n;
  }
  CHECK(writer->size() == data.size());
  return writer->commit();
}

Bytes get(BucketStorage& storage, const std::vector<Segment>& segments, uint64_t first, uint64_t length) {
  return keel::test::read_body(*storage.read(segments, first, length), length);
}

size_t pack_count(engine::ChunkStore& store) { return store.repository().catalog().list_packs().size(); }

}  // namespace

TEST_CASE("dedupe storage: round trip, ranges across chunk and segment boundaries", "[gateway][dedupe]") {
  Fixture f;
  auto store = f.open_store();
  DedupeStorage storage(store, f.repo_path());
  const Bytes first = random_bytes(150'000, 1), second = random_bytes(90'000, 2);
  const std::string a = put(storage, first), b = put(storage, second);
  const auto chunks = decode_chunk_list(a);
  REQUIRE(chunks.size() > 5);

  // One segment, as a PutObject.
  const std::vector<Segment> one{{a, first.size()}};
  CHECK(get(storage, one, 0, first.size()) == first);
  uint64_t boundary = 0;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    boundary += chunks[i].length;
    CHECK(get(storage, one, boundary - 3, 8) == slice(first, boundary - 3, 8));  // straddles a cut
    CHECK(get(storage, one, boundary, 1) == slice(first, boundary, 1));          // starts on one
  }
  CHECK(get(storage, one, first.size() - 1, 1) == slice(first, first.size() - 1, 1));

  // Two segments, as a completed multipart upload.
  Bytes both = first;
  both.insert(both.end(), second.begin(), second.end());
  const std::vector<Segment> two{{a, first.size()}, {b, second.size()}};
  CHECK(get(storage, two, 0, both.size()) == both);
  CHECK(get(storage, two, first.size() - 10, 20) == slice(both, first.size() - 10, 20));
  CHECK(get(storage, two, 5000, 200'000) == slice(both, 5000, 200'000));
}

TEST_CASE("dedupe storage: the empty object", "[gateway][dedupe]") {
  Fixture f;
  auto store = f.open_store();
  DedupeStorage storage(store, f.repo_path());
  const std::string ref = storage.create()->commit();
  CHECK(decode_chunk_list(ref).empty());
  CHECK(get(storage, {{ref, 0}}, 0, 0).empty());
  CHECK(pack_count(*store) == 0);
}

TEST_CASE("dedupe storage: a re-uploaded object stores no new chunks", "[gateway][dedupe]") {
  Fixture f;
  auto store = f.open_store();
  DedupeStorage storage(store, f.repo_path());
  const Bytes data = random_bytes(120'000, 3);
  const std::string first = put(storage, data);
  const uint64_t stored = store->stored_bytes();
  const size_t packs = pack_count(*store);
  CHECK(stored > 0);
  const std::string again = put(storage, data);
  CHECK(again == first);
  CHECK(store->stored_bytes() == stored);
  CHECK(pack_count(*store) == packs);
  CHECK(store->logical_bytes() == 2 * data.size());

  // Also across a restart: the index comes from the catalog.
  store.reset();
  auto reopened = f.open_store();
  DedupeStorage storage2(reopened, f.repo_path());
  CHECK(put(storage2, data) == first);
  CHECK(reopened->stored_bytes() == 0);
}

TEST_CASE("chunk store: sessions share a batch's packs and wait for chunks another session has in flight",
          "[gateway][dedupe]") {
  Fixture f;
  auto store = f.open_store();
  const Bytes x = random_bytes(5000, 4), y = random_bytes(6000, 5);
  auto a = store->session();
  auto b = store->session();
  const Id x_id = a.add(x);
  CHECK(b.add(x) == x_id);  // in flight: not stored twice
  b.add(y);
  a.sync();  // flushes the batch holding both sessions' chunks
  CHECK(pack_count(*store) == 1);
  b.sync();  // nothing left to flush
  CHECK(pack_count(*store) == 1);
  CHECK(store->repository().catalog().find_blob(x_id).has_value());

  // Durable on the target: a catalog rebuilt from the target alone finds the chunks.
  auto elsewhere = engine::Repository::open(targets::local::open_local_target(f.repo_path(), false),
                                            {"secret", f.dir.file("other-catalog.db")});
  CHECK(elsewhere->read_blob(x_id) == x);
}

TEST_CASE("gateway gc: keeps every chunk a version or part references, reclaims the rest", "[gateway][dedupe]") {
  Fixture f;
  const GatewayConfig config = f.config();
  const Bytes kept_current = random_bytes(40'000, 10), kept_locked = random_bytes(40'000, 11),
              kept_part = random_bytes(40'000, 12), dropped = random_bytes(40'000, 13);
  std::string current_ref, locked_ref, part_ref, dropped_ref;
  {
    // Each object in its own batch, hence its own pack.
    auto store = std::make_shared<engine::ChunkStore>(open_bucket_repository(config.buckets.at(0).repository, "test"));
    DedupeStorage storage(store, f.repo_path());
    current_ref = put(storage, kept_current);
    locked_ref = put(storage, kept_locked);
    part_ref = put(storage, kept_part);
    dropped_ref = put(storage, dropped);
  }
  {
    std::filesystem::create_directories(config.state_dir);
    MetadataStore metadata(config.state_dir + "/gateway.db");
    BucketRecord bucket{"ddb", "a", 1, f.repo_path(), true, "Enabled", true};
    bucket.mode = "dedupe";
    metadata.put_bucket(bucket);
    ObjectRecord locked;
    locked.bucket = "ddb";
    locked.key = "k";
    locked.version_id = "v1";
    locked.size = kept_locked.size();
    locked.lock = {"COMPLIANCE", INT64_MAX, LegalHold::kNone};
    locked.segments = {{locked_ref, kept_locked.size()}};
    metadata.put_object(locked);  // noncurrent once v2 is put
    ObjectRecord current = locked;
    current.version_id = "v2";
    current.lock = {};
    current.size = kept_current.size();
    current.segments = {{current_ref, kept_current.size()}};
    metadata.put_object(current);
    ObjectRecord deleted = current;
    deleted.version_id = "v3";
    deleted.segments = {{dropped_ref, dropped.size()}};
    metadata.put_object(deleted);
    metadata.delete_version("ddb", "k", "v3");
    metadata.create_upload({"u1", "ddb", "k", "a", 1, {}, ""});
    metadata.put_part("u1", {1, kept_part.size(), "etag", 1, part_ref});
  }

  engine::PruneOptions options;
  options.grace = std::chrono::seconds(0);
  const auto results = collect_garbage(config, options);
  REQUIRE(results.size() == 1);
  CHECK(results[0].buckets == std::vector<std::string>{"ddb"});
  CHECK(results[0].prune.packs_deleted >= 1);

  auto repo = engine::Repository::open(targets::local::open_local_target(f.repo_path(), false),
                                       {"secret", f.dir.file("check-catalog.db")});
  for (const auto& [ref, data] : {std::pair{current_ref, &kept_current}, std::pair{locked_ref, &kept_locked},
                                   std::pair{part_ref, &kept_part}}) {
    Bytes whole;
    for (const ChunkPiece& chunk : decode_chunk_list(ref)) {
      const Bytes bytes = repo->read_blob(chunk.id);
      whole.insert(whole.end(), bytes.begin(), bytes.end());
    }
    CHECK(whole == *data);
  }
  for (const ChunkPiece& chunk : decode_chunk_list(dropped_ref)) {
    CHECK_FALSE(repo->catalog().find_blob(chunk.id).has_value());
  }

  // A running gateway holds the state lock: no collection then.
  const FileLock held = lock_state(config);
  CHECK_THROWS_AS(collect_garbage(config, options), Error);
}

TEST_CASE("dedupe bucket configuration: repository, password and target options", "[gateway][dedupe]") {
  const auto parse = [](const std::string& bucket) {
    std::istringstream in("[server]\nlisten = 127.0.0.1:0\nstate_dir = /s\n[user:a]\naccess_key = x\nsecret_key = y\n"
                          "[bucket:ddb]\nowner = a\n" + bucket);
    return GatewayConfig::parse(in, "test.conf");
  };
  const GatewayConfig config = parse("mode = dedupe\nrepository = s3://b/p\npassword_env = PW\nendpoint = "
                                     "http://127.0.0.1:9000\ninsecure_tls = true\n");
  const BucketConfig& b = config.buckets.at(0);
  CHECK(b.mode == BucketMode::kDedupe);
  CHECK(b.repository.location == "s3://b/p");
  CHECK(b.repository.password_env == "PW");
  CHECK(b.repository.target.endpoint == "http://127.0.0.1:9000");
  CHECK(b.repository.target.insecure_tls);
  CHECK_THROWS_WITH(parse("mode = dedupe\nrepository = /r\n"), Catch::Contains("password_file"));
  CHECK_THROWS_WITH(parse("mode = dedupe\npassword_file = /p\n"), Catch::Contains("repository"));
  CHECK_THROWS_WITH(parse("path = /p\nrepository = /r\n"), Catch::Contains("only for mode = dedupe"));
  CHECK_THROWS_WITH(parse("mode = dedupe\nrepository = /r\npassword_env = P\ninsecure_tls = yes\n"),
                    Catch::Contains("true or false"));
}
