// One suite that every Target implementation must pass. Each implementation
// registers a factory in conformance_targets(); a factory that cannot run
// here (no server) returns nullptr and its cases are skipped with a message.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "targets/fault_injecting_target.h"
#include "targets/local/local_target.h"
#include "targets/memory/memory_target.h"
#include "targets/retrying_target.h"
#include "targets/s3/s3_target.h"
#include "util/error.h"
#include "util/id.h"

using namespace keel;
using keel::targets::Target;

namespace {

struct TargetFactory {
  std::string name;
  std::function<std::unique_ptr<Target>()> make;
};

// Local targets live under one scratch directory, removed when the tests end.
struct ScratchDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("keel-conformance-" + Id::random().short_hex());
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// S3 runs when tests/s3/with-rgw.sh (or the user) names a server: each
// target is a fresh bucket on it.
std::unique_ptr<Target> make_s3_target() {
  std::string endpoint = env_or_empty("S3_ENDPOINT");
  if (endpoint.empty()) return nullptr;
  targets::s3::S3ClientOptions options;
  options.endpoint = endpoint;
  if (std::string region = env_or_empty("S3_REGION"); !region.empty()) options.region = region;
  targets::s3::Credentials creds{env_or_empty("S3_ACCESS_KEY"), env_or_empty("S3_SECRET_KEY"), ""};
  return targets::make_retrying_target(
      targets::s3::open_s3_target("s3://keel-conformance-" + Id::random().short_hex() + "/repo", options, creds,
                                  /*create=*/true),
      {.max_attempts = 3});
}

// The in-memory target behind the retrying decorator, with transient errors
// and lost responses on one call in six: retried, it must behave as a
// target that never failed. (remove_stale_uploads is left alone: its count
// cannot survive a lost response.)
std::unique_ptr<Target> make_retried_faulty_memory_target() {
  using targets::FaultKind;
  using targets::TargetOp;
  std::vector<targets::FaultRule> rules;
  for (TargetOp op : {TargetOp::kPut, TargetOp::kGetRange, TargetOp::kHead, TargetOp::kList, TargetOp::kRemove,
                      TargetOp::kStartUpload, TargetOp::kWritePart, TargetOp::kCommit}) {
    for (FaultKind kind : {FaultKind::kError, FaultKind::kLostResponse}) {
      rules.push_back({.kind = kind, .when = {.op = op, .probability = 1.0 / 12}});
    }
  }
  auto faulty = targets::make_fault_injecting_target(
      targets::memory::open_memory_target(std::make_shared<targets::memory::MemoryStore>()),
      std::make_shared<targets::FaultInjector>(rules, /*seed=*/7));
  return targets::make_retrying_target(std::move(faulty), {.max_attempts = 30, .base = std::chrono::milliseconds(0),
                                                           .cap = std::chrono::milliseconds(1)});
}

std::vector<TargetFactory> conformance_targets() {
  static ScratchDir scratch;
  return {
      {"local", [] {
         return targets::local::open_local_target((scratch.path / Id::random().short_hex()).string(), /*create=*/true);
       }},
      {"memory", [] { return targets::memory::open_memory_target(std::make_shared<targets::memory::MemoryStore>()); }},
      {"memory, retried through faults", make_retried_faulty_memory_target},
      {"s3", make_s3_target},
  };
}

Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

std::set<std::string> list_keys(Target& t, const std::string& prefix) {
  std::set<std::string> keys;
  t.list(prefix, [&](const targets::ObjectInfo& o) { keys.insert(o.key); });
  return keys;
}

}  // namespace

TEST_CASE("targets: put, get, head, range, list, delete", "[target]") {
  for (const TargetFactory& f : conformance_targets()) {
    SECTION(f.name) {
      auto t = f.make();
      if (!t) {
        WARN(f.name << " target not available here (set S3_ENDPOINT, or run under tests/s3/with-rgw.sh); skipped");
        continue;
      }
      Bytes data = random_bytes(100000, 1);
      t->put("a/b/obj", data);
      REQUIRE(t->get("a/b/obj") == data);
      auto info = t->head("a/b/obj");
      REQUIRE(info);
      CHECK(info->size == data.size());

      Bytes part(1000);
      CHECK(t->get_range("a/b/obj", 5000, part) == part.size());
      CHECK(std::equal(part.begin(), part.end(), data.begin() + 5000));
      // A range running past the end returns what is there.
      CHECK(t->get_range("a/b/obj", data.size() - 10, part) == 10);

      t->put("a/c", as_bytes("x"));
      t->put("b/d", as_bytes("y"));
      CHECK(list_keys(*t, "a/") == std::set<std::string>{"a/b/obj", "a/c"});
      CHECK(list_keys(*t, "a/b") == std::set<std::string>{"a/b/obj"});
      CHECK(list_keys(*t, "zzz/").empty());

      t->remove("a/c");
      CHECK_FALSE(t->head("a/c"));
      CHECK_NOTHROW(t->remove("a/c"));  // removing a missing key is fine
      t->put("b/d", as_bytes("replaced"));
      CHECK(t->get("b/d") == Bytes(as_bytes("replaced").begin(), as_bytes("replaced").end()));
    }
  }
}

TEST_CASE("targets: a listing tells when each object was written, by the store's clock", "[target]") {
  // Prune believes a condemnation's date only as far as this (engine/condemnation.h):
  // every target must report it. A store's clock may differ from ours by as much
  // as S3 accepts in a signed request (15 minutes); a local one agrees.
  constexpr int64_t kSkew = 15 * 60;
  auto modified = [](Target& t, const std::string& key) {
    int64_t found = 0;
    t.list(key, [&](const targets::ObjectInfo& o) {
      if (o.key == key) found = o.modified_unix;
    });
    return found;
  };
  for (const TargetFactory& f : conformance_targets()) {
    SECTION(f.name) {
      auto t = f.make();
      if (!t) continue;
      const int64_t before = targets::unix_now();
      t->put("m/put", as_bytes("x"));
      auto upload = t->start_upload("m/upload");
      upload->write_part(1, 0, as_bytes("y"));
      upload->commit();
      const int64_t after = targets::unix_now();
      for (const std::string key : {"m/put", "m/upload"}) {
        INFO(key);
        CHECK(modified(*t, key) >= before - kSkew);
        CHECK(modified(*t, key) <= after + kSkew);
      }
    }
  }
}

TEST_CASE("targets: missing keys and empty objects", "[target]") {
  for (const TargetFactory& f : conformance_targets()) {
    SECTION(f.name) {
      auto t = f.make();
      if (!t) continue;
      CHECK_FALSE(t->head("nope"));
      Bytes buf(10);
      try {
        t->get_range("nope", 0, buf);
        FAIL("expected kNotFound");
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kNotFound);
        CHECK(std::string(e.what()).find("nope") != std::string::npos);
      }
      CHECK_THROWS_AS(t->get("nope"), Error);
      t->put("empty", {});
      REQUIRE(t->head("empty"));
      CHECK(t->head("empty")->size == 0);
      CHECK(t->get("empty").empty());
    }
  }
}

TEST_CASE("targets: multipart uploads, out of order and concurrent", "[target]") {
  for (const TargetFactory& f : conformance_targets()) {
    SECTION(f.name) {
      auto t = f.make();
      if (!t) continue;
      const size_t part = std::max<uint64_t>(t->min_part_size(), 1 << 20);
      Bytes data = random_bytes(part * 3 + 12345, 2);
      auto upload = t->start_upload("packs/big");
      std::vector<std::thread> writers;
      for (int n = 3; n >= 0; --n) {  // last part first
        uint32_t i = static_cast<uint32_t>(n);
        writers.emplace_back([&, i] {
          size_t off = i * part, len = std::min(part, data.size() - off);
          upload->write_part(i + 1, off, ByteView(data.data() + off, len));
        });
      }
      for (auto& w : writers) w.join();
      CHECK_FALSE(t->head("packs/big"));  // invisible until committed
      upload->commit();
      CHECK(t->get("packs/big") == data);

      // An upload dropped without commit leaves nothing behind.
      {
        auto aborted = t->start_upload("packs/never");
        aborted->write_part(1, 0, ByteView(data.data(), 100));
      }
      CHECK_FALSE(t->head("packs/never"));
      CHECK(list_keys(*t, "packs/") == std::set<std::string>{"packs/big"});
    }
  }
}

TEST_CASE("targets: concurrent writers to different keys", "[target]") {
  for (const TargetFactory& f : conformance_targets()) {
    SECTION(f.name) {
      auto t = f.make();
      if (!t) continue;
      std::vector<std::thread> threads;
      for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&, i] {
          for (int j = 0; j < 10; ++j) {
            std::string key = "c/" + std::to_string(i) + "/" + std::to_string(j);
            t->put(key, random_bytes(1000 + j, static_cast<uint32_t>(i * 100 + j)));
          }
        });
      }
      for (auto& th : threads) th.join();
      CHECK(list_keys(*t, "c/").size() == 80);
      CHECK(t->get("c/3/7") == random_bytes(1007, 307));
    }
  }
}

TEST_CASE("targets: keys that escape the repository are refused", "[target]") {
  auto t = conformance_targets().front().make();
  CHECK_THROWS_AS(t->put("../escape", as_bytes("x")), Error);
  CHECK_THROWS_AS(t->put("/abs", as_bytes("x")), Error);
}

TEST_CASE("targets: stale uploads of a crashed run are removed", "[target]") {
  for (const TargetFactory& f : conformance_targets()) {
    SECTION(f.name) {
      auto t = f.make();
      if (!t) continue;
      auto orphan = t->start_upload("packs/orphan");
      orphan->write_part(1, 0, as_bytes("left behind by a crash"));
      CHECK(t->remove_stale_uploads(std::chrono::hours(1)) == 0);  // too young
      CHECK(t->remove_stale_uploads(std::chrono::seconds(0)) == 1);
      CHECK_FALSE(t->head("packs/orphan"));
    }
  }
}

TEST_CASE("targets: a local directory caps restore's reads in flight at two per core", "[target][restore]") {
  // Its reader threads do the opening and writing too: more than two per core
  // only multiply their buffers (docs/performance.md, issue 20, seventh step).
  auto t = conformance_targets().front().make();
  CHECK(t->read_concurrency() == 2 * std::max(1u, std::thread::hardware_concurrency()));
}
