// Backup, restore, prune and check against the in-memory target under
// injected faults, one fault per run, swept over every call the step makes
// (targets/fault_injecting_target.h), and restore and backup under file
// system faults (util/fault_injecting_file_system.h). Each run must either
// succeed (always, where the fault is transient and retried) or fail with a
// keel::Error, and must never say it did what it did not. After every run a
// model check opens the repository fresh (a new catalog synced from the
// target): each snapshot reported committed restores byte-identical, and
// `check --read-data` finds nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/check.h"
#include "engine/forget.h"
#include "engine/keys.h"
#include "engine/prune.h"
#include "engine/restore.h"
#include "targets/fault_injecting_target.h"
#include "targets/memory/memory_target.h"
#include "targets/retrying_target.h"
#include "tests/unit/test_support.h"
#include "util/error.h"
#include "util/fault_injecting_file_system.h"

using namespace keel;
using namespace keel::engine;
namespace fs = std::filesystem;
using targets::FaultKind;
using targets::FaultRule;
using targets::TargetOp;

namespace {

constexpr const char* kPassword = "secret";

using Files = std::map<std::string, Bytes>;  // relative path -> content

Files read_tree(const fs::path& root) {
  Files out;
  if (!fs::exists(root)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    Bytes data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out[fs::relative(e.path(), root).string()] = std::move(data);
  }
  return out;
}

void write_file(const fs::path& path, const Bytes& data) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()),
                                              static_cast<std::streamsize>(data.size()));
}

// A small repository in memory (small chunks and packs: many packs, parts
// and ranged reads from little data) and the source trees backed up into it.
struct World {
  test::TempDir dir{"keel-faults"};
  std::shared_ptr<targets::memory::MemoryStore> store = std::make_shared<targets::memory::MemoryStore>();
  std::shared_ptr<targets::FaultInjector> injector = std::make_shared<targets::FaultInjector>();
  std::map<Id, Files> committed;  // snapshots reported committed, and what they hold
  int catalogs = 0;

  World() {
    RepoConfig config;
    config.chunker = {1024, 4096, 16384};
    config.pack_size = 48 << 10;
    config.part_size = 16 << 10;
    auto repo = Repository::init(targets::memory::open_memory_target(store), config, {kPassword, new_catalog()});
    cheapen_key_slots(*repo);
  }

  // The slot init wrote costs a full scrypt to open; runs here open the
  // repository hundreds of times, so it is resealed with a cheap one.
  void cheapen_key_slots(Repository& repo) {
    auto objects = store->objects();
    for (auto& [key, data] : objects) {
      if (key.rfind("keys/", 0) != 0) continue;
      KeySlotInfo info = read_key_slot_info(data, key);
      data = seal_key_slot(repo.keys(), info, kPassword, {.n = 2, .r = 1, .p = 1});
    }
    store->set_objects(std::move(objects));
  }

  std::string new_catalog() { return dir.file("catalog-" + std::to_string(++catalogs) + ".db"); }
  fs::path src(const std::string& name) const { return dir.path / "src" / name; }

  // The target as commands see it: retries over faults over memory.
  std::unique_ptr<targets::Target> faulty_target() {
    auto faulty = targets::make_fault_injecting_target(targets::memory::open_memory_target(store), injector);
    return targets::make_retrying_target(std::move(faulty), {.max_attempts = 3, .base = std::chrono::milliseconds(0),
                                                             .cap = std::chrono::milliseconds(1)});
  }

  std::unique_ptr<Repository> open_faulty() {
    injector->set_rules({}, 1);
    return Repository::open(faulty_target(), {kPassword, new_catalog()});
  }
  std::unique_ptr<Repository> open_clean() {
    return Repository::open(targets::memory::open_memory_target(store), {kPassword, new_catalog()});
  }

  void write_source(const std::string& name, uint64_t seed) {
    for (int i = 0; i < 5; ++i) {
      write_file(src(name) / ("f" + std::to_string(i)), test::random_bytes(9000 + 7000 * i, seed + i));
    }
    write_file(src(name) / "same-as-f1", test::random_bytes(16000, seed + 1));
    write_file(src(name) / "sub" / "empty", {});
  }

  catalog::SnapshotRecord backup(Repository& repo, const std::string& name, FileSystem* file_system = nullptr) {
    auto source = agents::fs::make_fs_source({src(name).string()}, {.file_system = file_system});
    BackupOptions options;
    options.workers = 2;
    BackupProgress progress;
    BackupResult result = run_backup(repo, *source, options, progress);
    if (result.skipped.empty()) committed[result.snapshot.id] = read_tree(src(name));
    return result.snapshot;
  }

  // Restores `snapshot`'s source directory into `into`.
  RestoreResult restore(Repository& repo, const catalog::SnapshotRecord& snapshot, const fs::path& into,
                        FileSystem* file_system = nullptr) {
    RestoreOptions options;
    options.target_dir = into.string();
    options.subpath = snapshot.paths.front();
    options.file_system = file_system;
    RestoreProgress progress;
    return run_restore(repo, snapshot, options, progress);
  }

  // The model check: from a fresh catalog, every committed snapshot is there
  // and restores identical, and a full check is clean.
  void check_consistent(const std::string& after) {
    INFO("after " << after);
    auto repo = open_clean();
    std::set<Id> present;
    for (const auto& s : repo->catalog().list_snapshots()) present.insert(s.id);
    int n = 0;
    for (const auto& [id, files] : committed) {
      INFO("snapshot " << id.short_hex());
      REQUIRE(present.count(id));
      test::TempDir out{"keel-faults-out"};
      catalog::SnapshotRecord snapshot = repo->find_snapshot(id.hex());
      RestoreResult r = restore(*repo, snapshot, out.path / std::to_string(++n));
      CHECK(r.failures.empty());
      CHECK(read_tree(out.path / std::to_string(n)) == files);
    }
    CheckResult check = run_check(*repo, {.read_data = true});
    for (const auto& p : check.problems) FAIL_CHECK("check: " << p.message);
  }
};

// A restore that failed some files left nothing else: a failed file is
// not at its destination, no partial file remains, and every file is
// counted once.
void check_honest(const RestoreResult& r, const std::set<std::string>& failed, const Files& got, const Files& expected) {
  for (const auto& [path, data] : got) {
    INFO("on disk: " << path);
    CHECK(expected.count(path));
    CHECK(!failed.count(path));
  }
  CHECK(r.files_verified + r.files_failed == r.files);
  CHECK(r.files_failed <= failed.size());
}

// How a step ran under one fault.
struct Outcome {
  bool succeeded = false;
  std::string error;
};

// Runs `step` on a repository opened through the faulty target, with `rule`
// armed for the step alone. Anything but a keel::Error escaping is a bug.
Outcome run_with_fault(World& w, const FaultRule& rule, const std::function<void(Repository&)>& step) {
  auto repo = w.open_faulty();
  w.injector->set_rules({rule}, 42);
  Outcome out;
  try {
    step(*repo);
    out.succeeded = true;
  } catch (const Error& e) {
    out.error = e.what();
  }
  w.injector->set_rules({}, 1);
  return out;
}

struct CallCount {
  uint64_t all = 0, reads = 0;
};

// How many target calls, and ranged reads, `step` makes when nothing fails.
CallCount count_calls(World& w, const std::function<void(Repository&)>& step) {
  auto repo = w.open_faulty();
  // A zero delay on every read: it changes nothing and counts them.
  w.injector->set_rules({{.kind = FaultKind::kDelay, .when = {.op = TargetOp::kGetRange}, .delay = {}}}, 1);
  step(*repo);
  return {w.injector->calls(), w.injector->hits()};
}

struct FaultCase {
  const char* name;
  FaultKind kind;
  Persistence persistence;
  bool read_only = false;  // only means something on get_range: swept over those
};

// Transient faults are retried and must not be seen; permanent ones may fail the step.
const FaultCase kTargetFaults[] = {
    {"transient error", FaultKind::kError, Persistence::kTransient},
    {"lost response, retried", FaultKind::kLostResponse, Persistence::kTransient},
    {"permanent error", FaultKind::kError, Persistence::kPermanent},
    {"lost response, permanent", FaultKind::kLostResponse, Persistence::kPermanent},
    {"truncated read", FaultKind::kTruncatedRead, Persistence::kPermanent, true},
    {"corrupt read", FaultKind::kCorruptRead, Persistence::kPermanent, true},
};

// Sweeps each fault over each call of `step` (every `stride`-th call),
// restoring the target to `base` before each run. `after` checks one run.
void sweep(World& w, const std::string& step_name, const std::function<void(Repository&)>& step,
           const std::function<void(const FaultCase&, const Outcome&)>& after = {}) {
  const auto base = w.store->objects();
  const auto base_committed = w.committed;
  const CallCount count = count_calls(w, step);
  w.store->set_objects(base);
  w.committed = base_committed;
  REQUIRE(count.all > 0);
  for (const FaultCase& fault : kTargetFaults) {
    const uint64_t calls = fault.read_only ? count.reads : count.all;
    for (uint64_t call = 1; call <= calls; ++call) {
      INFO(step_name << ": " << fault.name << " at call " << call << " of " << calls);
      FaultRule rule{.kind = fault.kind, .when = {.call = call}, .persistence = fault.persistence};
      if (fault.read_only) rule.when.op = TargetOp::kGetRange;
      Outcome outcome = run_with_fault(w, rule, step);
      INFO("error: " << outcome.error);
      if (fault.persistence == Persistence::kTransient) CHECK(outcome.succeeded);
      if (after) after(fault, outcome);
      w.check_consistent(step_name + " with " + fault.name + " at call " + std::to_string(call));
      w.store->set_objects(base);
      w.committed = base_committed;
    }
  }
}

}  // namespace

TEST_CASE("faults: a backup hit at any call retries or fails cleanly, losing nothing", "[faults]") {
  World w;
  w.write_source("a", 1);
  {
    auto repo = w.open_clean();
    w.backup(*repo, "a");
  }
  w.write_source("b", 100);  // new data, and f1's twin deduped
  sweep(w, "backup", [&](Repository& repo) { w.backup(repo, "b"); });
}

TEST_CASE("faults: a restore hit at any call says which files failed and writes no wrong byte", "[faults]") {
  World w;
  w.write_source("a", 1);
  catalog::SnapshotRecord snapshot;
  {
    auto repo = w.open_clean();
    snapshot = w.backup(*repo, "a");
  }
  const Files expected = read_tree(w.src("a"));
  int run = 0;
  sweep(w, "restore", [&](Repository& repo) {
    const fs::path out = w.dir.path / ("restore-" + std::to_string(++run));
    RestoreResult r = w.restore(repo, snapshot, out);
    // Every file not reported failed is whole and right.
    Files got = read_tree(out);
    std::set<std::string> failed;
    for (const auto& f : r.failures) failed.insert(fs::relative(f.path, out).string());
    for (const auto& [path, data] : expected) {
      if (failed.count(path)) continue;
      INFO("restored " << path);
      CHECK(got[path] == data);
    }
    check_honest(r, failed, got, expected);
    fs::remove_all(out);
    if (!r.failures.empty()) throw Error(ErrorKind::kPartial, r.failures.front().reason);
  });
}

TEST_CASE("faults: prune hit at any call leaves every kept snapshot whole", "[faults]") {
  World w;
  w.write_source("old", 1);
  w.write_source("kept", 50);
  {
    auto repo = w.open_clean();
    catalog::SnapshotRecord old = w.backup(*repo, "old");
    w.backup(*repo, "kept");
    RetentionPolicy keep_kept;
    keep_kept.keep_tags = {"keep"};  // none are tagged: the selected snapshots all go
    forget(*repo, {.paths = {w.src("old").string()}}, keep_kept, GroupBy::kHostAndPaths, false);
    w.committed.erase(old.id);
  }
  // A prune that stops between repacking and deleting leaves blobs in two
  // packs: a normal state, which check must not report (issue 16).
  sweep(w, "prune", [&](Repository& repo) {
    PruneOptions options;
    options.grace = std::chrono::seconds(0);
    options.repack_threshold = 0.9;
    prune(repo, options);
  });
}

TEST_CASE("faults: check hit at any call reports or retries, never passes damage silently", "[faults]") {
  World w;
  w.write_source("a", 1);
  {
    auto repo = w.open_clean();
    w.backup(*repo, "a");
  }
  sweep(w, "check", [&](Repository& repo) {
    CheckResult r = run_check(repo, {.read_data = true});
    if (!r.problems.empty()) throw Error(ErrorKind::kIntegrity, r.problems.front().message);
  });
}

TEST_CASE("faults: restore through a failing file system reports each file it could not write", "[faults]") {
  World w;
  w.write_source("a", 1);
  auto repo = w.open_clean();
  catalog::SnapshotRecord snapshot = w.backup(*repo, "a");
  const Files expected = read_tree(w.src("a"));

  SECTION("short writes are completed") {
    FaultInjectingFileSystem disk;
    disk.schedule().set_rules({{.kind = FsFaultRule::kShortWrite, .when = {.op = FsOp::kPwrite}}}, 1);
    RestoreResult r = w.restore(*repo, snapshot, w.dir.path / "out", &disk);
    CHECK(disk.schedule().hits() > 0);
    CHECK(r.failures.empty());
    CHECK(read_tree(w.dir.path / "out") == expected);
  }
  SECTION("ENOSPC, EIO, a failed create or mkdir at any call") {
    uint64_t calls = 0;
    {
      FaultInjectingFileSystem counter;
      w.restore(*repo, snapshot, w.dir.path / "count", &counter);
      calls = counter.schedule().calls();
    }
    REQUIRE(calls > 0);
    for (int error : {ENOSPC, EIO}) {
      for (uint64_t call = 1; call <= calls; ++call) {
        INFO("errno " << error << " at call " << call << " of " << calls);
        FaultInjectingFileSystem disk;
        disk.schedule().set_rules({{.when = {.call = call}, .error = error}}, 1);
        const fs::path out = w.dir.path / ("out-" + std::to_string(error) + "-" + std::to_string(call));
        RestoreResult r;
        try {
          r = w.restore(*repo, snapshot, out, &disk);
        } catch (const Error& e) {
          CHECK(e.kind() == ErrorKind::kTargetIo);
          continue;
        }
        CHECK(disk.schedule().hits() == 1);
        std::set<std::string> failed;
        for (const auto& f : r.failures) failed.insert(fs::relative(f.path, out).string());
        Files got = read_tree(out);
        for (const auto& [path, data] : expected) {
          if (failed.count(path)) continue;
          INFO("restored " << path);
          CHECK(got[path] == data);
        }
        check_honest(r, failed, got, expected);
        fs::remove_all(out);
      }
    }
  }
}

TEST_CASE("faults: backup through a failing file system skips what it cannot read and stores the rest", "[faults]") {
  World w;
  w.write_source("a", 1);
  uint64_t calls = 0;
  {
    auto repo = w.open_clean();
    FaultInjectingFileSystem counter;
    w.backup(*repo, "a", &counter);
    calls = counter.schedule().calls();
  }
  REQUIRE(calls > 0);
  for (uint64_t call = 1; call <= calls; ++call) {
    INFO("EIO at call " << call << " of " << calls);
    auto repo = w.open_clean();
    FaultInjectingFileSystem disk;
    disk.schedule().set_rules({{.when = {.call = call}, .error = EIO}}, 1);
    auto source = agents::fs::make_fs_source({w.src("a").string()}, {.file_system = &disk});
    BackupOptions options;
    options.workers = 2;
    BackupProgress progress;
    BackupResult result = run_backup(*repo, *source, options, progress);
    CHECK(result.skipped.size() == disk.schedule().hits());
    // What was stored is what was read: the snapshot restores to the source
    // minus the skipped files.
    Files expected = read_tree(w.src("a"));
    for (const auto& s : result.skipped) expected.erase(fs::relative(s.path, w.src("a")).string());
    const fs::path out = w.dir.path / ("out-" + std::to_string(call));
    RestoreResult r = w.restore(*repo, result.snapshot, out);
    CHECK(r.failures.empty());
    CHECK(read_tree(out) == expected);
  }
}
