// Format-2 crypto: sealing to a public key, put-only key slots, and a
// repository that a put-only key writes to but cannot read.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/chunk_sealer.h"
#include "engine/condemnation.h"
#include "engine/keys.h"
#include "engine/pack.h"
#include "engine/pack_output.h"
#include "engine/prune.h"
#include "engine/public_seal.h"
#include "engine/repository.h"
#include "targets/memory/memory_target.h"
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
  auto store = std::make_shared<targets::memory::MemoryStore>();
  RepoConfig config;
  config.version = 2;
  auto full = Repository::init(targets::memory::open_memory_target(store), config, {"full", dir.file("full.db")});
  full->add_key_slot("put", KeyKind::kPutOnly);
  auto put = Repository::open(targets::memory::open_memory_target(store), {"put", dir.file("put.db")});
  CHECK(put->put_only());
  CHECK_THROWS_AS(put->add_key_slot("more", KeyKind::kFull), Error);

  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  const Bytes data = test::random_bytes(300'000, 9);
  std::ofstream(src + "/secret.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
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
  auto store = std::make_shared<targets::memory::MemoryStore>();
  RepoConfig config;
  config.version = 2;
  auto full = Repository::init(targets::memory::open_memory_target(store), config, {"full", dir.file("full.db")});
  full->add_key_slot("put", KeyKind::kPutOnly);
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  for (int i = 0; i < 3; ++i) {
    const Bytes data = test::random_bytes(200'000, 20 + i);
    std::ofstream(src + "/file" + std::to_string(i), std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
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
  {
    PackOutput output(put->content(), put->config().pack_size, 1 << 20, 2);
    for (const catalog::BlobLocation& loc : blobs) {
      const Bytes garbage = test::random_bytes(loc.blob.raw_length, 99);
      Bytes sealed;
      seal_chunk(*put, loc.blob.id, garbage, 0, sealed);
      output.writer().add(loc.blob.type, loc.blob.id, static_cast<uint32_t>(garbage.size()), sealed);
    }
    output.writer().flush();
    ChangeLogEntry logged;
    logged.packs_added = output.writer().take_committed();
    put->log_changes(logged);
  }
  Condemnation forged;
  forged.id = Id::random();
  forged.condemned_unix = 0;
  forged.host = "owner";
  forged.packs.assign(real_packs.begin(), real_packs.end());
  forged.running_backups = std::vector<Id>{};
  put_condemnation(put->target(), put->keys().index, forged);

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
