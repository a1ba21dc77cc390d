// keel repair --undelete (engine/undelete.h) on the memory target playing a
// versioned Object Lock bucket: credentials that may delete hide a locked
// repository (delete markers over its config, key slot, snapshots and packs,
// garbage versions over a pack and a snapshot); undelete finds the newest
// version of each that verifies, removes what lies above it, and every
// snapshot restores byte for byte again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/check.h"
#include "engine/restore.h"
#include "engine/undelete.h"
#include "targets/memory/memory_target.h"
#include "targets/open_versioned_store.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<targets::Target> bucket(const std::shared_ptr<targets::memory::MemoryStore>& store) {
  return targets::memory::open_memory_target(store, {.name = "vault", .object_lock = true, .versioning = true});
}

struct LockedRepository {
  test::TempDir dir{"keel-undelete"};
  std::shared_ptr<targets::memory::MemoryStore> store = std::make_shared<targets::memory::MemoryStore>();
  std::vector<std::pair<Id, Bytes>> snapshots;  // each holds one file "f" with these bytes

  LockedRepository() {
    RepoConfig config;
    config.object_lock = ObjectLockConfig{targets::LockMode::kGovernance, std::chrono::seconds(86400)};
    Repository::init(bucket(store), config, {"secret", std::string(kInMemoryCatalog)});
    auto repo = open();
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      const std::string src = dir.file("src");
      fs::remove_all(src);
      fs::create_directories(src);
      Bytes data = test::random_bytes(200'000, seed);
      std::ofstream(src + "/f", std::ios::binary)
          .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
      auto source = agents::fs::make_fs_source({src}, {});
      BackupProgress progress;
      const Id id = run_backup(*repo, *source, BackupOptions{}, progress, [](const SkippedItem&) {}).snapshot.id;
      snapshots.emplace_back(id, std::move(data));
    }
  }

  // A fresh catalog each time: what the target holds, nothing remembered.
  std::unique_ptr<Repository> open() { return Repository::open(bucket(store), {"secret", std::string(kInMemoryCatalog)}); }

  std::vector<std::string> keys(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& [key, bytes] : store->objects()) {
      if (key.starts_with(prefix)) out.push_back(key);
    }
    return out;
  }

  void every_snapshot_restores() {
    auto repo = open();
    CheckOptions check;
    check.read_data = true;
    for (const CheckProblem& p : run_check(*repo, check).problems) FAIL_CHECK(p.message);
    REQUIRE(repo->catalog().list_snapshots().size() == snapshots.size());
    for (const auto& [id, data] : snapshots) {
      const fs::path out = dir.path / ("restore-" + id.short_hex());
      RestoreOptions options;
      options.target_dir = out.string();
      RestoreProgress progress;
      CHECK(run_restore(*repo, *repo->read_snapshot(id), options, progress).failures.empty());
      const fs::path file = out / fs::path(dir.file("src")).relative_path() / "f";
      std::ifstream in(file, std::ios::binary);
      CHECK(Bytes(std::istreambuf_iterator<char>(in), {}) == data);
    }
  }
};

bool is_kind(const Error& e, ErrorKind kind) { return e.kind() == kind; }

}  // namespace

TEST_CASE("repair --undelete brings back a repository hidden by delete markers and garbage versions",
          "[undelete][object-lock]") {
  LockedRepository r;
  auto thief = bucket(r.store);  // credentials that may delete and overwrite, but not bypass a lock
  auto admin = targets::memory::open_memory_versions(r.store, "vault");
  const std::vector<std::string> packs = r.keys("packs/"), slots = r.keys("keys/"), snaps = r.keys("snapshots/");
  REQUIRE(packs.size() >= 2);
  REQUIRE(snaps.size() == 2);
  // The attack: a locked version cannot be deleted, but it can be hidden.
  std::string locked_version;
  admin->list_versions(packs[0], [&](const targets::ObjectVersion& v) { locked_version = v.version_id; });
  CHECK_THROWS(admin->remove_version(packs[0], locked_version, false));
  thief->remove("config");
  for (const std::string& key : slots) thief->remove(key);
  thief->remove(snaps[0]);
  thief->remove(packs[0]);
  thief->put(snaps[1], test::random_bytes(500, 7));
  thief->put(packs[1], test::random_bytes(5'000, 8));
  thief->put(packs[1], test::random_bytes(5'000, 9));  // two garbage versions over one good one
  const std::string garbage = "snapshots/" + Id::random().hex();
  thief->put(garbage, test::random_bytes(300, 10));  // garbage with no good version
  CHECK_THROWS_MATCHES(r.open(), Error, Catch::Matchers::Predicate<Error>([](const Error& e) {
                         return is_kind(e, ErrorKind::kRepository);
                       }));

  UndeleteOptions options{.password = "secret"};
  SECTION("a dry run reports and changes nothing") {
    const size_t before = r.store->version_count(packs[1]);
    UndeleteResult dry = undelete(*admin, options);
    CHECK(dry.steps.size() == 3 + slots.size() + 3);  // markers: config, slots, a snapshot, a pack; 3 garbage versions
    CHECK(dry.restored.size() == 5 + slots.size());
    CHECK(dry.skipped.empty());  // the lone garbage object: one version, for keel check and repair
    CHECK(r.store->version_count(packs[1]) == before);
    CHECK(!r.store->objects().count("config"));
  }

  SECTION("applied, every snapshot restores byte for byte") {
    options.dry_run = false;
    UndeleteResult done = undelete(*admin, options);
    CHECK(!done.refused());
    size_t garbage_versions = 0;
    for (const UndeleteStep& step : done.steps) {
      if (step.delete_marker) continue;
      ++garbage_versions;
      CHECK((step.key == snaps[1] || step.key == packs[1]));
      CHECK(!step.reason.empty());
    }
    CHECK(garbage_versions == 3);
    CHECK(r.store->version_count(packs[1]) == 1);
    thief->remove(garbage);  // one version alone is left for keel check and repair
    r.every_snapshot_restores();
    // Nothing left to do.
    UndeleteResult again = undelete(*admin, options);
    CHECK(again.steps.empty());
    CHECK(again.restored.empty());
  }

  SECTION("--since leaves what was hidden before it") {
    options.since_unix = targets::unix_now() + 3600;
    UndeleteResult later = undelete(*admin, options);
    CHECK(later.steps.empty());
    CHECK(later.skipped.size() == 5 + slots.size());
  }

  SECTION("the password must open a key slot's good version") {
    options.password = "wrong";
    CHECK_THROWS_MATCHES(undelete(*admin, options), Error, Catch::Matchers::Predicate<Error>([](const Error& e) {
                           return is_kind(e, ErrorKind::kWrongPassword);
                         }));
  }
}

TEST_CASE("repair --undelete: a locked garbage version needs the GOVERNANCE bypass", "[undelete][object-lock]") {
  LockedRepository r;
  auto thief = bucket(r.store);
  auto admin = targets::memory::open_memory_versions(r.store, "vault");
  // A bucket's default retention locks what the thief writes, too.
  thief->set_write_retention(targets::WriteRetention{targets::LockMode::kGovernance, std::chrono::seconds(3600), {}});
  const std::string snapshot = r.keys("snapshots/").front();
  thief->put(snapshot, test::random_bytes(400, 3));

  UndeleteOptions options{.password = "secret", .dry_run = false};
  UndeleteResult refused = undelete(*admin, options);
  REQUIRE(refused.steps.size() == 1);
  CHECK(refused.refused());
  CHECK(refused.steps[0].error.find("GOVERNANCE") != std::string::npos);
  CHECK(refused.restored.empty());

  options.bypass_governance = true;
  UndeleteResult bypassed = undelete(*admin, options);
  CHECK(!bypassed.refused());
  CHECK(bypassed.restored == std::vector<std::string>{snapshot});
  r.every_snapshot_restores();
}

TEST_CASE("repair --undelete needs a store that keeps versions", "[undelete]") {
  CHECK_THROWS_MATCHES(targets::open_versioned_store("/srv/backup", {}), Error,
                       Catch::Matchers::Predicate<Error>([](const Error& e) {
                         return is_kind(e, ErrorKind::kUsage) &&
                                std::string(e.what()).find("keeps no versions") != std::string::npos;
                       }));
}
