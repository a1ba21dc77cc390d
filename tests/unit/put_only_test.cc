// Format-2 crypto: sealing to a public key, put-only key slots, and a
// repository that a put-only key writes to but cannot read.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/chunk_sealer.h"
#include "engine/check.h"
#include "engine/condemnation.h"
#include "engine/forget.h"
#include "engine/keys.h"
#include "engine/pack.h"
#include "engine/pack_output.h"
#include "engine/prune.h"
#include "engine/public_seal.h"
#include "engine/repair.h"
#include "engine/repository.h"
#include "engine/restore.h"
#include "targets/memory/memory_target.h"
#include "targets/target_decorator.h"
#include "temp_dir.h"
#include "test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;

namespace {

ErrorKind open_failure(const SealingKeyPair& pair, ByteView sealed, ByteView associated) {
  try {
    open_sealed_to(pair, sealed, associated, "pack 1234 preamble");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("pack 1234 preamble") != std::string::npos);
    return e.kind();
  }
  FAIL("the sealed box opened");
  return ErrorKind::kFailure;
}

// What a host holding a put-only key can forge: a pack of garbage under
// the ids of `blobs` (sealed under its own blob key, so it authenticates),
// logged (data and trees in packs of their own); returns the packs.
std::vector<Id> write_false_copies(Repository& put, const std::vector<catalog::BlobLocation>& blobs) {
  PackOutput output(put.content(), put.config().pack_size, 1 << 20, 2);
  for (const catalog::BlobLocation& loc : blobs) {
    const Bytes garbage = test::random_bytes(loc.blob.raw_length, 99);
    Bytes sealed;
    seal_chunk(put, loc.blob.id, garbage, 0, sealed);
    output.writer().add(loc.blob.type, loc.blob.id, static_cast<uint32_t>(garbage.size()), sealed);
  }
  output.writer().flush();
  ChangeLogEntry logged;
  logged.packs_added = output.writer().take_committed();
  put.log_changes(logged);
  std::vector<Id> packs;
  for (const LoggedPack& p : logged.packs_added) packs.push_back(p.pack.id);
  return packs;
}

// ... and a condemnation of `packs`, dated 1970 with no backup running,
// sealed under the index key it holds; returns the record's id.
Id condemn_falsely(Repository& put, const std::set<Id>& packs) {
  Condemnation forged;
  forged.id = Id::random();
  forged.condemned_unix = 0;
  forged.host = "owner";
  forged.packs.assign(packs.begin(), packs.end());
  forged.running_backups = std::vector<Id>{};
  put_condemnation(put.target(), put.keys().index, forged);
  return forged.id;
}

// Runs `before` once, just before the first snapshot object is written:
// what other hosts do while a backup has uploaded its packs and holds its
// lease but has not saved its snapshot yet.
class BeforeSnapshot final : public targets::TargetDecorator {
 public:
  BeforeSnapshot(std::unique_ptr<targets::Target> inner, std::function<void()> before)
      : TargetDecorator(std::move(inner)), before_(std::move(before)) {}
  void put(const std::string& key, ByteView data) override {
    if (key.starts_with("snapshots/") && before_) std::exchange(before_, nullptr)();
    TargetDecorator::put(key, data);
  }

 private:
  std::function<void()> before_;
};

// A format-2 repository in memory whose full key ("full") added a put-only
// key slot ("put"): the starting point of every attack below.
struct PutOnlyRepository {
  std::shared_ptr<targets::memory::MemoryStore> store = std::make_shared<targets::memory::MemoryStore>();
  std::unique_ptr<Repository> full;

  explicit PutOnlyRepository(const test::TempDir& dir) {
    RepoConfig config;
    config.version = 2;
    full = Repository::init(targets::memory::open_memory_target(store), config, {"full", dir.file("full.db")});
    full->add_key_slot("put", KeyKind::kPutOnly);
  }
};

void write_file(const std::string& path, const Bytes& data) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace

TEST_CASE("sealing to a public key round-trips for the private key", "[put-only][crypto]") {
  const SealingKeyPair pair = SealingKeyPair::generate();
  for (size_t size : {0, 1, 32, 4096, 1 << 20}) {
    const Bytes plain = test::random_bytes(size, size);
    const Bytes sealed = seal_to(pair.public_key, plain, as_bytes("pack 7"));
    CHECK(sealed.size() == plain.size() + kPublicSealOverhead);
    CHECK(open_sealed_to(pair, sealed, as_bytes("pack 7"), "test") == plain);
  }
  // A fresh ephemeral key each time: the same plaintext never seals the same.
  CHECK(seal_to(pair.public_key, as_bytes("x"), {}) != seal_to(pair.public_key, as_bytes("x"), {}));
}

TEST_CASE("the X25519 key pair is RFC 7748's", "[put-only][crypto]") {
  // RFC 7748 section 6.1, Alice's key pair.
  const Bytes priv = from_hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  Key256 key;
  std::copy(priv.begin(), priv.end(), key.begin());
  const SealingKeyPair pair = SealingKeyPair::from_private(key);
  CHECK(to_hex(pair.public_key) == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
}

TEST_CASE("a box sealed to a public key opens for no other key, AD or altered byte", "[put-only][crypto]") {
  const SealingKeyPair pair = SealingKeyPair::generate();
  const Bytes sealed = seal_to(pair.public_key, as_bytes("the blob key of a pack"), as_bytes("pack 7"));
  CHECK(open_failure(SealingKeyPair::generate(), sealed, as_bytes("pack 7")) == ErrorKind::kIntegrity);
  CHECK(open_failure(pair, sealed, as_bytes("pack 8")) == ErrorKind::kIntegrity);
  for (size_t i = 0; i < sealed.size(); ++i) {
    INFO("byte " << i << " altered");
    Bytes bad = sealed;
    bad[i] ^= 0x01;
    CHECK(open_failure(pair, bad, as_bytes("pack 7")) == ErrorKind::kIntegrity);
  }
  CHECK(open_failure(pair, ByteView(sealed).first(kPublicSealOverhead - 1), as_bytes("pack 7")) ==
        ErrorKind::kIntegrity);
  // A low-order ephemeral point (all zero) is refused, not turned into a zero key.
  Bytes degenerate = sealed;
  std::fill(degenerate.begin(), degenerate.begin() + 32, 0);
  CHECK(open_failure(pair, degenerate, as_bytes("pack 7")) == ErrorKind::kIntegrity);
}

TEST_CASE("a put-only key slot holds no data key and no private key", "[put-only][keys]") {
  const ScryptParams fast{1 << 4, 1, 1};
  const MasterKeys full = MasterKeys::generate(2);
  CHECK(full.sealing.public_key == SealingKeyPair::from_private(full.sealing.private_key).public_key);

  const KeySlotInfo info{Id::random(), 1, "host", "user"};
  std::optional<MasterKeys> opened = open_key_slot(seal_key_slot(full, info, "pw", fast), "pw", "slot");
  REQUIRE(opened);
  CHECK(opened->format == 2);
  CHECK(opened->full());
  CHECK(opened->data == full.data);
  CHECK(opened->index == full.index);
  CHECK(opened->sealing.private_key == full.sealing.private_key);

  const Bytes slot = seal_key_slot(full.put_only(), info, "pw", fast);
  CHECK(read_key_slot_info(slot, "slot").kind == KeyKind::kPutOnly);
  std::optional<MasterKeys> put = open_key_slot(slot, "pw", "slot");
  REQUIRE(put);
  CHECK(put->kind == KeyKind::kPutOnly);
  CHECK(put->id == full.id);
  CHECK(put->chunker == full.chunker);
  CHECK(put->index == full.index);
  CHECK(put->sealing.public_key == full.sealing.public_key);
  CHECK(put->data == Key256{});
  CHECK(put->sealing.private_key == Key256{});
  CHECK_FALSE(open_key_slot(slot, "other", "slot"));
  // Format 1 has no put-only keys.
  CHECK_THROWS_AS(MasterKeys::generate(1).put_only(), Error);
}

TEST_CASE("a put-only key backs up into a format-2 repository but reads nothing back", "[put-only][backup]") {
  test::TempDir dir("keel-put-only");
  PutOnlyRepository repo(dir);
  auto& store = repo.store;
  auto& full = repo.full;
  auto put = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("put.db")});
  CHECK(put->put_only());
  CHECK_THROWS_AS(put->add_key_slot("more", KeyKind::kFull), Error);

  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  const Bytes data = test::random_bytes(300'000, 9);
  write_file(src + "/secret.bin", data);
  auto source = agents::fs::make_fs_source({src}, {});
  BackupProgress progress;
  BackupResult result = run_backup(*put, *source, BackupOptions{}, progress, [](const SkippedItem&) {});

  // The full key reads the record and every byte; the put-only key, even
  // in a fresh catalog, sees the header alone and cannot open a blob.
  full->follow_log();
  std::optional<catalog::SnapshotRecord> record = full->read_snapshot(result.snapshot.id);
  REQUIRE(record);
  CHECK(record->paths == std::vector<std::string>{src});
  Tree root = full->load_tree(record->root);
  CHECK_FALSE(root.entries.empty());

  auto fresh = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("fresh.db")});
  std::optional<catalog::SnapshotRecord> header = fresh->read_snapshot(result.snapshot.id);
  REQUIRE(header);
  CHECK(header->host == record->host);
  CHECK(header->time_ns == record->time_ns);
  CHECK(header->paths.empty());
  CHECK(header->root == Id{});
  try {
    fresh->read_blob(record->root);
    FAIL("a put-only key read a tree");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kUsage);
    CHECK(std::string(e.what()).find("put-only") != std::string::npos);
  }
}

TEST_CASE("prune deletes no pack whose blobs a forged copy and condemnation claim", "[put-only][prune]") {
  // A put-only key seals under its own blob key, so it can write a pack of
  // garbage that authenticates under any blob ids it read from the headers,
  // and a condemnation (sealed under the index key it holds) naming every
  // real pack as condemned long ago with no backup running. The owner's
  // prune must re-verify the other copies before it deletes a pack.
  test::TempDir dir("keel-put-only-prune");
  PutOnlyRepository repo(dir);
  auto& store = repo.store;
  auto& full = repo.full;
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  for (int i = 0; i < 3; ++i) {
    write_file(src + "/file" + std::to_string(i), test::random_bytes(200'000, 20 + i));
  }
  auto source = agents::fs::make_fs_source({src}, {});
  BackupProgress progress;
  run_backup(*full, *source, BackupOptions{}, progress, [](const SkippedItem&) {});
  std::set<Id> real_packs;
  for (const catalog::PackRecord& p : full->catalog().list_packs()) real_packs.insert(p.id);
  REQUIRE_FALSE(real_packs.empty());

  // Before: prune deleted the real packs of data the false copies claim
  // (they counted as kept elsewhere), and failed on a false tree once it
  // was the copy read.
  bool forge_trees = false;
  SECTION("false copies of the data") {}
  SECTION("false copies of the data and the trees") { forge_trees = true; }
  auto put = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("put.db")});
  std::vector<catalog::BlobLocation> blobs;
  put->catalog().for_each_blob_location([&](const catalog::BlobLocation& loc) {
    if (forge_trees || loc.blob.type == catalog::BlobType::kData) blobs.push_back(loc);
  });
  REQUIRE_FALSE(blobs.empty());
  write_false_copies(*put, blobs);
  condemn_falsely(*put, real_packs);

  auto owner = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("owner.db")});
  PruneOptions options;
  options.grace = std::chrono::seconds(0);
  options.repack_threshold = 0;
  PruneResult result = prune(*owner, options);
  CHECK(result.packs_deleted == 0);
  const std::map<std::string, Bytes> objects = store->objects();
  for (const Id& pack : real_packs) {
    INFO("pack " << pack.hex());
    CHECK(objects.count(pack_key(pack)) == 1);
  }
  // Each pack kept for a false copy is named (one that holds the only copy
  // of a tree is simply taken back into use).
  const size_t named = std::count_if(result.warnings.begin(), result.warnings.end(), [](const std::string& w) {
    return w.find("was not deleted") != std::string::npos && w.find("does not hash to its id") != std::string::npos;
  });
  CHECK(named >= 1);
  CHECK(result.packs_resurrected == real_packs.size());
}

TEST_CASE("a forged condemnation's date and running-backup list are not believed", "[put-only][prune]") {
  // A put-only key seals condemnation records, so it can date one 1970 and
  // list no running backup. Before, the owner's next prune deleted every
  // named pack no snapshot used at once, without the grace period and
  // without waiting for the backups running then: here the packs of a
  // forgotten snapshot that a running backup had deduplicated against,
  // which then saved a snapshot referring to deleted packs. Now the grace
  // counts from the store's Last-Modified of the record, and a backup whose
  // lease is older than the record counts as running when it was written.
  test::TempDir dir("keel-put-only-forged-date");
  PutOnlyRepository repo(dir);
  auto& store = repo.store;
  auto& full = repo.full;
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  const Bytes data = test::random_bytes(200'000, 70);
  write_file(src + "/data.bin", data);
  BackupProgress progress;
  auto source = agents::fs::make_fs_source({src}, {});
  const Id first = run_backup(*full, *source, BackupOptions{}, progress, [](const SkippedItem&) {}).snapshot.id;
  std::set<Id> old_packs;
  for (const catalog::PackRecord& p : full->catalog().list_packs()) old_packs.insert(p.id);
  forget_snapshots(*full, {first.hex()}, /*dry_run=*/false);  // its packs are unused now, not yet condemned

  PruneOptions options;
  options.repack_threshold = 0;
  SECTION("the grace counts from when the store wrote the record") { options.grace = std::chrono::hours(24); }
  SECTION("a backup running when it was written is waited for") { options.grace = std::chrono::seconds(0); }

  // A backup on a fresh host dedupes against those packs. Before it saves
  // its snapshot, the thief writes the record and the owner prunes.
  Id forged;
  int64_t forged_between[2] = {0, 0};
  PruneResult dry, pruned;
  auto attack = [&] {
    auto put = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("put.db")});
    forged_between[0] = unix_now();
    forged = condemn_falsely(*put, old_packs);
    forged_between[1] = unix_now();
    auto owner = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("owner.db")});
    PruneOptions dry_options = options;
    dry_options.dry_run = true;
    dry = prune(*owner, dry_options);
    pruned = prune(*owner, options);
  };
  auto host = Repository::open(std::make_unique<BeforeSnapshot>(targets::memory::open_memory_target(store), attack),
                               {"full", dir.file("host.db")});
  BackupProgress running_progress;
  const BackupResult running = run_backup(*host, *source, BackupOptions{}, running_progress, [](const SkippedItem&) {});
  REQUIRE(forged_between[1] != 0);
  REQUIRE(running.snapshot.stats.bytes_added < data.size() / 10);  // it deduplicated against the old packs

  // Neither run deletes an old pack; each is kept waiting, for the grace
  // from the record's Last-Modified and for the running backup.
  for (const PruneResult* r : {&dry, &pruned}) {
    CHECK(r->packs_deleted == 0);
    size_t waiting = 0;
    for (const PackDecision& d : r->decisions) {
      if (!old_packs.count(d.pack)) continue;
      INFO("pack " << d.pack.hex() << " " << pack_action_name(d.action));
      CHECK(d.action == PackAction::kWait);
      CHECK(d.condemned_unix == 0);
      CHECK(d.condemnation == std::optional<Id>(forged));
      CHECK(d.waiting_for_backups == 1);
      CHECK(d.deletable_unix >= forged_between[0] + options.grace.count());
      CHECK(d.deletable_unix <= forged_between[1] + options.grace.count());
      ++waiting;
    }
    CHECK(waiting == old_packs.size());
    // Both times of the record, and a warning naming it.
    auto seen = std::find_if(r->condemnations.begin(), r->condemnations.end(),
                             [&](const CondemnationSeen& c) { return c.id == forged; });
    REQUIRE(seen != r->condemnations.end());
    CHECK(seen->claimed_unix == 0);
    CHECK(seen->modified_unix >= forged_between[0]);
    CHECK(seen->modified_unix <= forged_between[1]);
    CHECK(seen->grace_from_unix == seen->modified_unix);
    CHECK(seen->waiting_for_backups == 1);
    CHECK(std::count_if(r->warnings.begin(), r->warnings.end(), [&](const std::string& w) {
            return w.find(condemnation_key(forged)) != std::string::npos && w.find("forged") != std::string::npos;
          }) == 1);
  }
  const std::map<std::string, Bytes> objects = store->objects();
  for (const Id& pack : old_packs) CHECK(objects.count(pack_key(pack)) == 1);

  // The backup's snapshot restores byte for byte, and once it has ended
  // the owner's prune takes the old packs back into use.
  auto owner = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("owner.db")});
  RestoreOptions restore_options;
  restore_options.target_dir = dir.file("restored");
  RestoreProgress restore_progress;
  const RestoreResult restored = run_restore(*owner, running.snapshot, restore_options, restore_progress);
  CHECK(restored.failures.empty());
  CHECK(read_file(restore_options.target_dir + src + "/data.bin") == data);
  PruneResult after = prune(*owner, PruneOptions{.grace = std::chrono::seconds(0), .repack_threshold = 0});
  CHECK(after.packs_deleted == 0);
  for (const Id& pack : old_packs) CHECK(store->objects().count(pack_key(pack)) == 1);
  for (const catalog::PackRecord& p : owner->catalog().list_packs()) CHECK_FALSE(p.condemned_unix);
  CHECK(run_check(*owner, CheckOptions{.read_data = true}).problems.empty());
}

TEST_CASE("reads verify each chunk against its id and read a false copy around", "[put-only][read]") {
  // The forged condemnation makes the false copies the ones reads prefer
  // (a copy in a pack in use comes first). Before: restore failed every
  // file's checksum (exit 6), check --read-data found nothing.
  test::TempDir dir("keel-put-only-read");
  PutOnlyRepository repo(dir);
  auto& store = repo.store;
  auto& full = repo.full;
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  std::map<std::string, Bytes> files;
  for (int i = 0; i < 3; ++i) {
    files["file" + std::to_string(i)] = test::random_bytes(150'000, 40 + i);
    write_file(src + "/file" + std::to_string(i), files["file" + std::to_string(i)]);
  }
  auto source = agents::fs::make_fs_source({src}, {});
  BackupProgress progress;
  const catalog::SnapshotRecord snapshot =
      run_backup(*full, *source, BackupOptions{}, progress, [](const SkippedItem&) {}).snapshot;
  std::set<Id> real_packs;
  for (const catalog::PackRecord& p : full->catalog().list_packs()) real_packs.insert(p.id);

  auto put = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("put.db")});
  std::vector<catalog::BlobLocation> chunks;
  put->catalog().for_each_blob_location([&](const catalog::BlobLocation& loc) {
    if (loc.blob.type == catalog::BlobType::kData) chunks.push_back(loc);
  });
  REQUIRE(chunks.size() >= 3);
  const std::vector<Id> written = write_false_copies(*put, chunks);
  REQUIRE(written.size() == 1);  // data chunks only
  const Id forged = written.front();
  condemn_falsely(*put, real_packs);

  auto owner = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("owner.db")});
  REQUIRE(owner->catalog().find_blob(chunks.front().blob.id)->pack == forged);
  auto named_forged = [&] {
    return std::count_if(owner->warnings().begin(), owner->warnings().end(), [&](const std::string& w) {
      return w.find("pack " + forged.hex()) != std::string::npos && w.find("does not hash to its id") != std::string::npos;
    });
  };

  SECTION("restore returns the right bytes, naming the false pack once") {
    RestoreOptions options;
    options.target_dir = dir.file("restored");
    RestoreProgress restore_progress;
    RestoreResult result = run_restore(*owner, snapshot, options, restore_progress);
    CHECK(result.failures.empty());
    CHECK(result.files_verified == files.size());
    for (const auto& [name, data] : files) CHECK(read_file(options.target_dir + src + "/" + name) == data);
    CHECK(named_forged() == 1);
  }
  SECTION("a single read (mount, dump, trees) too") {
    const Bytes chunk = owner->read_blob(chunks.front().blob.id);
    CHECK(keyed_id(owner->keys().id, chunk) == chunks.front().blob.id);
    CHECK(named_forged() == 1);
  }
  SECTION("check --read-data names every false copy; repair moves the pack aside and keeps the real ones") {
    CheckResult check = run_check(*owner, CheckOptions{.read_data = true});
    const size_t false_copies = std::count_if(check.problems.begin(), check.problems.end(), [&](const CheckProblem& p) {
      return p.message.find("pack " + forged.hex()) != std::string::npos &&
             p.message.find("does not hash to its id") != std::string::npos;
    });
    CHECK(false_copies == chunks.size());
    CHECK(check.problems.size() == chunks.size());
    RepairResult repaired = repair(*owner, RepairOptions{});
    CHECK(repaired.blobs_lost == 0);
    REQUIRE(repaired.damaged.size() == 1);
    CHECK(repaired.damaged.front().key == pack_key(forged));
    CHECK(store->objects().count(pack_key(forged)) == 0);
    for (const Id& pack : real_packs) CHECK(store->objects().count(pack_key(pack)) == 1);
    CHECK(run_check(*owner, CheckOptions{.read_data = true}).problems.empty());
  }
  SECTION("prune's repack copies no false copy into a new pack") {
    PruneOptions options;
    options.grace = std::chrono::seconds(0);
    options.repack_threshold = 1.01;  // every pack in use is rewritten
    PruneResult result = prune(*owner, options);
    CHECK(result.packs_written >= 1);
    CHECK(store->objects().count(pack_key(forged)) == 0);
    for (const catalog::BlobLocation& c : chunks) {
      for (const catalog::BlobLocation& copy : owner->catalog().find_blob_copies(c.blob.id)) {
        INFO("copy in pack " << copy.pack.hex());
        CHECK_FALSE(owner->content().check_copy(copy));
      }
    }
    CHECK(run_check(*owner, CheckOptions{.read_data = true}).problems.empty());
  }
}

TEST_CASE("a false copy stored before the data it names: a full key stores the real one", "[put-only][read][vouch]") {
  // The attack no read-time check can undo alone: a put-only key computes
  // the id of data another host will back up (a shared file) and stores
  // garbage under it first. A full key's backup must not deduplicate
  // against a pack no full key vouched for (engine/pack_vouch.h): it stores
  // the real chunk, so every file restores byte for byte; check --read-data
  // names the false copy and repair moves it aside, losing nothing. Before
  // vouching, the backup deduplicated against the forgery and the restore
  // failed the shared file. A catalog the put-only key kept is judged by
  // the next full key that opens it.
  test::TempDir dir("keel-put-only-first");
  PutOnlyRepository repo(dir);
  auto& store = repo.store;
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  const Bytes shared = test::random_bytes(150'000, 77);  // one chunk: under the minimum chunk size
  const Bytes own = test::random_bytes(90'000, 78);
  write_file(src + "/own", own);

  auto& owner = repo.full;
  auto backup = [&] {
    auto source = agents::fs::make_fs_source({src}, {});
    BackupProgress progress;
    return run_backup(*owner, *source, BackupOptions{}, progress, [](const SkippedItem&) {});
  };
  auto restore = [&](const catalog::SnapshotRecord& snapshot, const std::string& into) {
    RestoreOptions options;
    options.target_dir = dir.file(into);
    RestoreProgress progress;
    return run_restore(*owner, snapshot, options, progress);
  };
  // The owner's first backup (before the shared file exists): its packs and
  // their vouches are in the log, which the put-only key can read.
  backup();
  std::vector<LoggedPack> owner_packs;
  for (const std::string& key : list_log_keys(owner->target())) {
    if (auto entry = read_log_entry(owner->target(), owner->keys().index, key)) {
      for (const LoggedPack& p : entry->packs_added) owner_packs.push_back(p);
    }
  }
  REQUIRE_FALSE(owner_packs.empty());
  for (const LoggedPack& p : owner_packs) {
    CHECK(p.vouch.has_value());
    CHECK(owner->catalog().find_pack(p.pack.id)->vouched);
  }

  auto put = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("put.db")});
  catalog::BlobLocation target;
  target.blob.id = keyed_id(put->keys().id, shared);
  target.blob.type = catalog::BlobType::kData;
  target.blob.raw_length = static_cast<uint32_t>(shared.size());
  const std::vector<Id> written = write_false_copies(*put, {target});
  REQUIRE(written.size() == 1);
  const Id forged = written.front();
  // Vouches copied from the owner's entry: onto a claim of the false pack,
  // and onto a relocation of the chunk into one of the owner's packs.
  {
    const LoggedPack& real = owner_packs.front();
    ChangeLogEntry entry;
    LoggedPack claim;
    claim.pack = catalog::PackRecord{forged, store->objects().at(pack_key(forged)).size(), {}, 0, {}};
    catalog::BlobRecord false_record = target.blob;
    false_record.offset = kPackPreambleSize;
    claim.blobs = {false_record};
    claim.vouch = real.vouch;
    entry.packs_added.push_back(claim);
    catalog::BlobRecord relocated = real.blobs.front();
    relocated.id = target.blob.id;
    entry.relocated.push_back(LoggedRelocation{catalog::BlobLocation{real.pack.id, relocated}, real.vouch});
    put_log_entry(put->target(), put->keys().index, entry);
  }

  write_file(src + "/shared", shared);
  const BackupResult first = backup();
  // Stored again, in a pack of the owner's, not deduplicated against the forgery.
  CHECK(first.snapshot.stats.chunks_added >= 1);
  CHECK_FALSE(owner->catalog().find_pack(forged)->vouched);
  bool real_copy = false;
  for (const catalog::BlobLocation& copy : owner->catalog().find_blob_copies(target.blob.id)) {
    if (copy.pack != forged) real_copy = real_copy || owner->catalog().find_pack(copy.pack)->vouched;
  }
  CHECK(real_copy);

  // A second full-key host with a fresh catalog (a full listing: every
  // header read) vouches for the owner's packs and not for the forgery.
  {
    auto other = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("other.db")});
    for (const catalog::PackRecord& p : other->catalog().list_packs()) {
      INFO(p.id.hex());
      CHECK(p.vouched == (p.id != forged));
    }
  }
  // The put-only key's catalog indexed the owner's packs without judging
  // them; a full key that opens that catalog next judges them by their headers.
  for (const LoggedPack& p : owner_packs) CHECK_FALSE(put->catalog().find_pack(p.pack.id)->judged);
  {
    auto shared = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("put.db")});
    for (const catalog::PackRecord& p : shared->catalog().list_packs()) {
      INFO(p.id.hex());
      CHECK(p.judged);
      CHECK(p.vouched == (p.id != forged));
    }
  }

  const RestoreResult restored = restore(first.snapshot, "restored");
  CHECK(restored.failures.empty());
  CHECK(restored.files_verified == 2);
  CHECK(read_file(dir.file("restored") + src + "/shared") == shared);

  const CheckResult check = run_check(*owner, CheckOptions{.read_data = true});
  CHECK(std::any_of(check.problems.begin(), check.problems.end(), [&](const CheckProblem& p) {
    return p.message.find("pack " + forged.hex()) != std::string::npos &&
           p.message.find("does not hash to its id") != std::string::npos;
  }));
  const RepairResult repaired = repair(*owner, RepairOptions{});
  CHECK(repaired.blobs_lost == 0);
  CHECK(store->objects().count(pack_key(forged)) == 0);
  CHECK(run_check(*owner, CheckOptions{.read_data = true}).problems.empty());
  const RestoreResult again = restore(first.snapshot, "again");
  CHECK(again.failures.empty());
  CHECK(read_file(dir.file("again") + src + "/shared") == shared);
}

TEST_CASE("a forged change-log entry hides no snapshot and drops no pack", "[put-only][log]") {
  // A put-only key holds the index key that seals log entries. Before, an
  // entry claiming snapshots and packs removed made every catalog that
  // follows the log drop them until it next synced in full.
  test::TempDir dir("keel-put-only-log");
  PutOnlyRepository repo(dir);
  auto& store = repo.store;
  auto& full = repo.full;
  // Each backup writes a data pack and a tree pack.
  int backups = 0;
  SECTION("a few, each asked with HEAD") { backups = 2; }
  SECTION("many packs, asked with one listing") { backups = 5; }
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  std::vector<Id> snapshots;
  for (int i = 0; i < backups; ++i) {
    write_file(src + "/file", test::random_bytes(100'000, 60 + i));
    auto source = agents::fs::make_fs_source({src}, {});
    BackupProgress progress;
    snapshots.push_back(run_backup(*full, *source, BackupOptions{}, progress, [](const SkippedItem&) {}).snapshot.id);
  }
  std::vector<Id> packs;
  for (const catalog::PackRecord& p : full->catalog().list_packs()) packs.push_back(p.id);
  // A reader of the log from before the forgery.
  auto follower = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("follower.db")});
  REQUIRE(follower->catalog().list_snapshots().size() == snapshots.size());
  if (backups == 5) REQUIRE(packs.size() > 8);  // Repository::kHeadsBeforeListing: more are listed

  auto put = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("put.db")});
  ChangeLogEntry forged;
  forged.snapshots_removed = snapshots;
  forged.packs_removed = packs;
  put->log_changes(forged);

  auto reopened = Repository::open(targets::memory::open_memory_target(store), {"full", dir.file("follower.db")});
  CHECK(reopened->catalog().list_snapshots().size() == snapshots.size());
  CHECK(reopened->catalog().list_packs().size() == packs.size());
  const size_t warned = std::count_if(reopened->warnings().begin(), reopened->warnings().end(), [](const std::string& w) {
    return w.find("was removed, but it is still on") != std::string::npos;
  });
  CHECK(warned == snapshots.size() + packs.size());
}
