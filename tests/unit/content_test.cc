// The content layer (engine/content.h): pack writing committed to the index,
// planned and coalesced reads, and damage reported with pack and offset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "catalog/catalog.h"
#include "engine/blob_codec.h"
#include "engine/content.h"
#include "targets/local/local_target.h"
#include "targets/target_decorator.h"
#include "tests/unit/test_support.h"
#include "util/checksum.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;

namespace {

catalog::BlobLocation at(const Id& pack, uint64_t offset, uint32_t length) {
  catalog::BlobLocation loc;
  loc.pack = pack;
  loc.blob.offset = offset;
  loc.blob.stored_length = length;
  return loc;
}

// The parts each upload was handed: offset, size, and whether the buffer
// was 4 KiB-aligned (what a local target's O_DIRECT writes take as it is).
struct PartRecord {
  uint32_t number;
  uint64_t offset;
  size_t size;
  bool aligned;
};
class PartRecorder final : public targets::TargetDecorator {
 public:
  using TargetDecorator::TargetDecorator;
  std::unique_ptr<targets::Upload> start_upload(const std::string& key) override {
    struct Recording final : targets::UploadDecorator {
      Recording(std::unique_ptr<targets::Upload> inner, PartRecorder& owner, std::string key)
          : UploadDecorator(std::move(inner)), owner(owner), key(std::move(key)) {}
      void write_part(uint32_t number, uint64_t offset, ByteView data) override {
        {
          std::lock_guard lock(owner.mu);
          owner.parts[key].push_back({number, offset, data.size(), reinterpret_cast<uintptr_t>(data.data()) % 4096 == 0});
        }
        UploadDecorator::write_part(number, offset, data);
      }
      PartRecorder& owner;
      std::string key;
    };
    return std::make_unique<Recording>(TargetDecorator::start_upload(key), *this, key);
  }
  std::mutex mu;
  std::map<std::string, std::vector<PartRecord>> parts;  // by object key
};

// Who writes a Store's packs: a format-1 key, or in format 2 a full key
// (packs it vouches for) or a put-only key (packs it cannot vouch for).
enum class Writer { kFormat1, kFull, kPutOnly };

// A local target in a scratch directory (its uploads' parts recorded), an
// in-memory index, and blobs written through a ContentWriter into small packs;
// `content` reads them with a full key.
struct Store {
  explicit Store(Writer writer = Writer::kFormat1)
      : keys(MasterKeys::generate(writer == Writer::kFormat1 ? 1 : 2)),
        writer_keys(writer == Writer::kPutOnly ? keys.put_only() : keys) {}

  test::TempDir dir{"keel-content-test"};
  std::unique_ptr<targets::Target> target =
      std::make_unique<PartRecorder>(targets::local::open_local_target(dir.file("repo"), true));
  PartRecorder& recorder = static_cast<PartRecorder&>(*target);
  std::unique_ptr<catalog::Catalog> index = catalog::Catalog::open_in_memory();
  MasterKeys keys;
  MasterKeys writer_keys;
  PackKeys pack_keys{*target, keys};
  Content content{*target, pack_keys, *index};
  PackKeys writer_pack_keys{*target, writer_keys};
  Content writer_content{*target, writer_pack_keys, *index};
  std::vector<Id> ids;
  std::vector<Bytes> plain;
  static constexpr uint64_t kPartSize = 64 << 10;

  // `count` blobs of `size` bytes, in packs of about `pack_size`; those
  // numbered in `forged` are false copies (sealed under an id that their
  // content does not hash to, as a put-only key could write them). Those
  // numbered in `compressible` are stored compressed, the others raw.
  void write(size_t count, size_t size, uint64_t pack_size, catalog::BlobType type = catalog::BlobType::kData,
             const std::set<size_t>& forged = {}, const std::set<size_t>& compressible = {}) {
    ThreadPool uploads(2, 4);
    ByteBudget budget(1 << 20);
    ContentWriter writer(writer_content, PackWriterOptions{pack_size, kPartSize}, uploads, budget);
    Compressor compressor(1);
    Bytes sealed;
    for (size_t i = 0; i < count; ++i) {
      Bytes raw = test::random_bytes(size, ids.size() + 1);
      if (compressible.count(i)) std::fill(raw.begin() + static_cast<std::ptrdiff_t>(size / 8), raw.end(), uint8_t(i));
      Id id = keyed_id(keys.id, forged.count(i) ? test::random_bytes(size, 1000 + i) : raw);  // reads check it
      seal_blob(writer_pack_keys.write_key(), compressible.count(i) ? &compressor : nullptr, id, raw, sealed);
      writer.add(type, id, static_cast<uint32_t>(raw.size()), sealed);
      ids.push_back(id);
      plain.push_back(std::move(raw));
    }
    writer.flush();
  }

  std::vector<catalog::BlobLocation> locate(const std::vector<Id>& which) {
    std::vector<catalog::BlobLocation> out;
    for (const auto& loc : index->find_blobs(which)) out.push_back(loc.value());
    return out;
  }

  // Flips one byte of the pack object on disk.
  void damage(const Id& pack, uint64_t offset) {
    std::fstream f(dir.file("repo/" + pack_key(pack)), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ 0x40));
  }
};

// Collects what a read hands over (on reader threads: no Catch2 macros here).
struct Collector : BlobSink {
  std::mutex mu;
  std::map<size_t, Bytes> delivered;
  std::map<size_t, std::string> failed;
  std::vector<size_t> order;  // indexes as handed over, delivered or failed
  size_t repeats = 0;         // blobs handed over twice
  void deliver(size_t index, ByteView data) override {
    std::lock_guard lock(mu);
    order.push_back(index);
    if (!delivered.emplace(index, Bytes(data.begin(), data.end())).second) ++repeats;
  }
  void fail(size_t index, const Error& error) override {
    std::lock_guard lock(mu);
    order.push_back(index);
    if (!failed.emplace(index, error.what()).second) ++repeats;
  }
};

}  // namespace

TEST_CASE("plan_reads sorts by pack and offset and joins near neighbours", "[content]") {
  Id a = Id::random(), b = Id::random();
  std::vector<catalog::BlobLocation> blobs = {at(a, 200, 10),    at(b, 0, 30),        at(a, 0, 100),
                                              at(a, 10'000, 20), at(a, 10'020, 5000), at(a, 100, 50)};
  std::vector<PackRange> ranges = plan_reads(blobs, 100, 4096);
  // a: [0, 210) joins three blobs; 10'000 is too far; 10'020 would pass max_read. b apart.
  std::vector<PackRange> in_a, in_b;
  for (const PackRange& r : ranges) (r.pack == a ? in_a : in_b).push_back(r);
  REQUIRE(in_a.size() == 3);
  REQUIRE(in_b.size() == 1);
  CHECK((in_a[0].offset == 0 && in_a[0].length == 210 && in_a[0].blobs == std::vector<size_t>{2, 5, 0}));
  CHECK((in_a[1].offset == 10'000 && in_a[1].length == 20 && in_a[1].blobs == std::vector<size_t>{3}));
  CHECK((in_a[2].offset == 10'020 && in_a[2].length == 5000 && in_a[2].blobs == std::vector<size_t>{4}));
  CHECK((in_b[0].offset == 0 && in_b[0].length == 30 && in_b[0].blobs == std::vector<size_t>{1}));
}

TEST_CASE("a content writer commits each pack's blobs to the index", "[content]") {
  Store s;
  s.write(40, 3000, 32 << 10);
  s.write(3, 500, 32 << 10, catalog::BlobType::kTree);
  std::vector<catalog::PackRecord> packs = s.index->list_packs();
  REQUIRE(packs.size() >= 4);
  size_t indexed = 0;
  std::set<catalog::BlobType> types;
  for (const catalog::PackRecord& p : packs) {
    std::optional<targets::ObjectInfo> object = s.target->head(pack_key(p.id));
    REQUIRE(object);
    CHECK(object->size == p.size);
    CHECK(p.xxh3_128.size() == 16);
    std::vector<catalog::BlobRecord> blobs = s.index->blobs_in_pack(p.id);
    // Data and trees never share a pack; the header agrees with the index.
    CHECK(std::all_of(blobs.begin(), blobs.end(), [&](auto& b) { return b.type == blobs.front().type; }));
    types.insert(blobs.front().type);
    CHECK(read_pack_header(*s.target, s.keys, p.id, p.size).blobs.size() == blobs.size());
    indexed += blobs.size();
  }
  CHECK(indexed == s.ids.size());
  CHECK(types.size() == 2);
  for (size_t i = 0; i < s.ids.size(); ++i) CHECK(s.content.read(s.ids[i]) == s.plain[i]);
  CHECK_THROWS_MATCHES(s.content.read(Id::random()), Error, Catch::Predicate<Error>([](const Error& e) {
                         return e.kind() == ErrorKind::kNotFound;
                       }));
}

TEST_CASE("a pack streams out in aligned parts of exactly the part size, blobs spanning two", "[content]") {
  Store s;
  s.write(100, 3001, 256 << 10);  // a pack of five parts, then the rest; no blob ends on a part's edge
  REQUIRE(s.index->list_packs().size() == 2);
  for (const catalog::PackRecord& p : s.index->list_packs()) {
    std::vector<PartRecord> parts = s.recorder.parts.at(pack_key(p.id));
    std::sort(parts.begin(), parts.end(), [](auto& a, auto& b) { return a.number < b.number; });
    REQUIRE(parts.size() == (p.size + Store::kPartSize - 1) / Store::kPartSize);
    uint64_t offset = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      CHECK(parts[i].number == i + 1);
      CHECK(parts[i].offset == offset);
      CHECK(parts[i].aligned);
      if (i + 1 < parts.size()) CHECK(parts[i].size == Store::kPartSize);
      CHECK(parts[i].size > 0);
      offset += parts[i].size;
    }
    CHECK(offset == p.size);
    CHECK(read_pack_header(*s.target, s.keys, p.id, p.size).blobs.size() == s.index->blobs_in_pack(p.id).size());
  }
  for (size_t i = 0; i < s.ids.size(); ++i) CHECK(s.content.read(s.ids[i]) == s.plain[i]);
}

TEST_CASE("a read coalesces neighbours and delivers every blob opened", "[content]") {
  Store s;
  s.write(30, 2000, 1 << 20);  // one pack
  REQUIRE(s.index->list_packs().size() == 1);
  // Every other blob: the gaps between them are one blob long.
  std::vector<Id> wanted;
  for (size_t i = 0; i < s.ids.size(); i += 2) wanted.push_back(s.ids[i]);
  std::vector<catalog::BlobLocation> blobs = s.locate(wanted);
  uint64_t stored = 0, first = UINT64_MAX, last_end = 0;
  for (const auto& b : blobs) {
    stored += b.blob.stored_length;
    first = std::min(first, b.blob.offset);
    last_end = std::max(last_end, b.blob.offset + b.blob.stored_length);
  }

  SECTION("joined across the gaps: one read of the whole span") {
    std::vector<PackRange> ranges = plan_reads(blobs, 4096, 16 << 20);
    REQUIRE(ranges.size() == 1);
    Collector got;
    ReadStats stats = s.content.read(blobs, ranges, ReadOptions{}, got);
    CHECK(stats.bytes_read == last_end - first);
    CHECK(got.failed.empty());
    CHECK(got.repeats == 0);
    REQUIRE(got.delivered.size() == wanted.size());
    for (size_t i = 0; i < wanted.size(); ++i) CHECK(got.delivered[i] == s.plain[2 * i]);
  }
  SECTION("gaps not joined: only the blobs' bytes, on several readers") {
    std::vector<PackRange> ranges = plan_reads(blobs, 0, 16 << 20);
    CHECK(ranges.size() == wanted.size());
    Collector got;
    ReadStats stats = s.content.read(blobs, ranges, ReadOptions{.readers = 4, .memory_budget = 8 << 10}, got);
    CHECK(stats.bytes_read == stored);
    CHECK(got.delivered.size() == wanted.size());
  }
  SECTION("sealed: the stored bytes, checked") {
    Collector got;
    s.content.read(blobs, plan_reads(blobs, 4096, 16 << 20), ReadOptions{.form = BlobForm::kSealed}, got);
    REQUIRE(got.delivered.size() == blobs.size());
    for (size_t i = 0; i < blobs.size(); ++i) CHECK(xxh3_64(got.delivered[i]) == blobs[i].blob.xxh3);
  }
  SECTION("cancelled: stops with kInterrupted") {
    std::atomic<bool> cancel{true};
    Collector got;
    CHECK_THROWS_MATCHES(s.content.read(blobs, plan_reads(blobs, 0, 16 << 20), ReadOptions{.cancel = &cancel}, got),
                         Error, Catch::Predicate<Error>([](const Error& e) { return e.kind() == ErrorKind::kInterrupted; }));
  }
}

// Opens blobs where it asks (BlobSink::place), in memory of its own.
struct Placer : Collector {
  std::map<size_t, Bytes> places;  // by index, as asked
  std::set<size_t> from_place;     // delivered from where it asked
  std::span<uint8_t> place(size_t index, size_t length) override {
    std::lock_guard lock(mu);
    Bytes& b = places[index];
    b.assign(length, 0xee);
    return b;
  }
  void deliver(size_t index, ByteView data) override {
    {
      std::lock_guard lock(mu);
      if (places.count(index) && data.data() == places[index].data()) from_place.insert(index);
    }
    Collector::deliver(index, data);
  }
};

TEST_CASE("compressed blobs are opened where the sink places them, where no id check follows", "[content]") {
  const std::set<size_t> compressible{0, 1, 2, 5, 6, 9};
  SECTION("an authentic key: placed, delivered from there, the raw ones from the reader's buffers") {
    Store s;
    s.write(10, 20000, 1 << 20, catalog::BlobType::kData, {}, compressible);
    std::vector<catalog::BlobLocation> blobs = s.locate(s.ids);
    for (size_t i = 0; i < blobs.size(); ++i) {
      CHECK((blobs[i].blob.stored_length < 20000) == (compressible.count(i) == 1));  // stored as meant
    }
    s.damage(blobs[6].pack, blobs[6].blob.offset + 40);  // a placed one fails
    Placer got;
    s.content.read(blobs, plan_reads(blobs, 4096, 16 << 20), ReadOptions{.readers = 2}, got);
    CHECK(got.repeats == 0);
    CHECK(got.places.size() == blobs.size());  // asked for every blob
    CHECK(got.failed.count(6) == 1);
    for (size_t i = 0; i < blobs.size(); ++i) {
      if (i == 6) continue;
      CHECK(got.delivered[i] == s.plain[i]);
      CHECK(got.from_place.count(i) == compressible.count(i));
    }
  }
  SECTION("a put-only writer's packs: never placed, each blob checked against its id first") {
    Store s(Writer::kPutOnly);
    s.write(10, 20000, 1 << 20, catalog::BlobType::kData, {4}, compressible);
    std::vector<catalog::BlobLocation> blobs = s.locate(s.ids);
    Placer got;
    s.content.read(blobs, plan_reads(blobs, 4096, 16 << 20), ReadOptions{}, got);
    CHECK(got.places.empty());
    CHECK(got.failed.count(4) == 1);  // the false copy
    CHECK(got.delivered.size() == blobs.size() - 1);
  }
}

TEST_CASE("a damaged range is reported with its pack and offset", "[content]") {
  Store s;
  s.write(10, 2000, 1 << 20);
  std::vector<catalog::BlobLocation> blobs = s.locate(s.ids);
  const catalog::BlobLocation& victim = blobs[3];
  s.damage(victim.pack, victim.blob.offset + 7);
  std::string offset = "at offset " + std::to_string(victim.blob.offset);

  try {
    s.content.read(s.ids[3]);
    FAIL("a damaged blob was read");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kIntegrity);
    CHECK_THAT(e.what(), Catch::Contains("checksum mismatch") && Catch::Contains(victim.pack.hex()) &&
                             Catch::Contains(offset) && Catch::Contains(s.ids[3].short_hex()));
  }

  // In a coalesced read only that blob fails; its neighbours in the range arrive.
  Collector got;
  std::vector<PackRange> ranges = plan_reads(blobs, 4096, 16 << 20);
  REQUIRE(ranges.size() == 1);
  s.content.read(blobs, ranges, ReadOptions{}, got);
  REQUIRE(got.failed.size() == 1);
  CHECK_THAT(got.failed[3], Catch::Contains(victim.pack.hex()) && Catch::Contains(offset));
  CHECK(got.delivered.size() == blobs.size() - 1);
  CHECK(got.delivered[4] == s.plain[4]);

  // A scrub names the same blob, and the whole-pack checksum is not reported twice.
  PackScrub scrub = s.content.scrub(*s.index->list_packs().begin());
  CHECK(scrub.bad_blobs == std::vector<Id>{s.ids[3]});
  REQUIRE(scrub.problems.size() == 1);
  CHECK_THAT(scrub.problems[0], Catch::Contains(offset));
}

TEST_CASE("a pack shorter than the index fails the blobs of the missing range", "[content]") {
  Store s;
  s.write(6, 2000, 1 << 20);
  std::vector<catalog::BlobLocation> blobs = s.locate(s.ids);
  const Id pack = blobs[0].pack;
  std::filesystem::resize_file(s.dir.file("repo/" + pack_key(pack)), blobs[4].blob.offset + 10);
  Collector got;
  // max_read 1: each blob read alone (adjacent blobs would join even with no gap).
  s.content.read(blobs, plan_reads(blobs, 0, 1), ReadOptions{}, got);
  CHECK(got.delivered.size() == 4);
  REQUIRE(got.failed.size() == 2);
  CHECK_THAT(got.failed[4], Catch::Contains("shorter than the index says") && Catch::Contains(pack.hex()));
  PackScrub scrub = s.content.scrub(s.index->list_packs().front());
  REQUIRE(!scrub.problems.empty());
  CHECK_THAT(scrub.problems[0], Catch::Contains("truncated"));
}

TEST_CASE("false copies among blobs verified together are each found, the others handed over in order", "[content]") {
  // Ids are checked four blobs at a time: false copies in the first and
  // second batch and at the end of a range whose last batch is not full.
  // Written as a put-only key can: into packs no full key vouched for.
  Store s(Writer::kPutOnly);
  const std::set<size_t> forged{1, 6, 9};
  s.write(10, 3000, 1 << 20, catalog::BlobType::kData, forged);
  std::vector<catalog::BlobLocation> blobs = s.locate(s.ids);
  std::vector<PackRange> ranges = plan_reads(blobs, 4096, 16 << 20);
  REQUIRE(ranges.size() == 1);

  SECTION("a read fails each false copy (no other is indexed) and delivers the rest in range order") {
    Collector got;
    s.content.read(blobs, ranges, ReadOptions{}, got);
    CHECK(got.order == ranges[0].blobs);
    CHECK(got.repeats == 0);
    REQUIRE(got.failed.size() == forged.size());
    for (size_t i = 0; i < blobs.size(); ++i) {
      if (forged.count(i)) {
        CHECK_THAT(got.failed[i], Catch::Contains("does not hash to its id") && Catch::Contains(s.ids[i].short_hex()));
      } else {
        CHECK(got.delivered[i] == s.plain[i]);
      }
    }
  }
  SECTION("one blob read alone is verified too") {
    CHECK(s.content.read(s.ids[5]) == s.plain[5]);
    CHECK_THROWS_WITH(s.content.read(s.ids[6]), Catch::Contains("does not hash to its id"));
    CHECK(s.content.check_copy(blobs[9]).has_value());
    CHECK(!s.content.check_copy(blobs[8]).has_value());
  }
  SECTION("a scrub names exactly the false copies") {
    PackScrub scrub = s.content.scrub(s.index->list_packs().front());
    std::set<Id> bad(scrub.bad_blobs.begin(), scrub.bad_blobs.end());
    CHECK(bad == std::set<Id>{s.ids[1], s.ids[6], s.ids[9]});
    CHECK(scrub.problems.size() == forged.size());
  }
}

TEST_CASE("blobs under an authentic key are not hashed again on reads; a scrub hashes every one", "[content]") {
  // Only a full key seals under the data key (format 1) or a blob key whose
  // preamble it vouched for (format 2): a blob that opens there is its id's
  // content, so reads skip the id (engine/pack_keys.h). Blobs "forged" here
  // stand for a writer's bug, which only check --read-data's scrub can see.
  for (Writer writer : {Writer::kFormat1, Writer::kFull, Writer::kPutOnly}) {
    INFO(static_cast<int>(writer));
    Store s(writer);
    s.write(6, 3000, 1 << 20, catalog::BlobType::kData, {2});
    std::vector<catalog::BlobLocation> blobs = s.locate(s.ids);
    const bool authentic = writer != Writer::kPutOnly;
    CHECK(s.pack_keys.blob_key(blobs[0].pack).authentic == authentic);
    Collector got;
    s.content.read(blobs, plan_reads(blobs, 4096, 16 << 20), ReadOptions{}, got);
    CHECK(got.delivered.size() == (authentic ? 6 : 5));
    CHECK(got.failed.size() == (authentic ? 0 : 1));
    CHECK(s.content.scrub(s.index->list_packs().front()).bad_blobs == std::vector<Id>{s.ids[2]});
  }
}
