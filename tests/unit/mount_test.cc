// keel mount's file system without FUSE: the offset → chunk lookup, the
// bounded caches, the synthetic top levels and path resolution, reads across
// chunks and holes, and a real repository read back through it.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/mount/chunk_cache.h"
#include "engine/mount/file_layout.h"
#include "engine/mount/lru_cache.h"
#include "engine/mount/mount_source.h"
#include "engine/mount/snapshot_fs.h"
#include "targets/local/local_target.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;
using namespace keel::engine::mount;
namespace fs = std::filesystem;

namespace {

ContentRef data_ref(uint64_t length, uint8_t tag) {
  Id id;
  id.bytes[0] = tag;
  id.bytes[1] = 1;  // never zero
  return {id, length, false};
}
ContentRef hole_ref(uint64_t length) { return {Id{}, length, true}; }

// A chunk's content, made up from its id so any chunk can be checked.
Bytes chunk_content(const Id& id, uint64_t length) {
  Bytes out(length);
  for (uint64_t i = 0; i < length; ++i) out[i] = static_cast<uint8_t>(id.bytes[0] * 31 + id.bytes[2] + i * 7);
  return out;
}

// Snapshots, trees and chunks in memory; counts the chunks read.
class MemorySource : public MountSource {
 public:
  std::vector<catalog::SnapshotRecord> records;
  std::map<Id, Tree> trees;
  std::map<Id, uint64_t> chunk_lengths;
  std::atomic<int> chunk_reads{0};

  std::vector<catalog::SnapshotRecord> snapshots() override { return records; }
  Tree tree(const Id& id) override {
    auto it = trees.find(id);
    if (it == trees.end()) throw Error(ErrorKind::kNotFound, "tree " + id.short_hex());
    return it->second;
  }
  Bytes chunk(const Id& id) override {
    ++chunk_reads;
    return chunk_content(id, chunk_lengths.at(id));
  }

  Id add_tree(Tree tree) {
    Id id = Id::random();
    trees[id] = std::move(tree);
    return id;
  }
  TreeEntry file(const std::string& name, std::vector<ContentRef> refs) {
    TreeEntry e;
    e.meta.name = name;
    e.meta.type = NodeType::kFile;
    e.meta.mode = 0640;
    e.meta.uid = 1000;
    e.meta.mtime_ns = 1'700'000'000'123'456'789;
    for (const ContentRef& r : refs) {
      e.meta.size += r.length;
      if (!r.hole) chunk_lengths[r.chunk] = r.length;
    }
    e.content = std::move(refs);
    return e;
  }
  catalog::SnapshotRecord snapshot(int64_t time_s, const std::string& host, std::vector<std::string> tags, Id root) {
    catalog::SnapshotRecord s;
    s.id = Id::random();
    s.time_ns = time_s * 1'000'000'000;
    s.host = host;
    s.tags = std::move(tags);
    s.root = root;
    records.push_back(s);
    return records.back();
  }
};

std::string read_all(SnapshotFs& sfs, const std::string& path, size_t piece = 100'000) {
  FileHandle* f = sfs.open(path);
  REQUIRE(f);
  std::string out;
  std::string buf(piece, '\0');
  for (uint64_t at = 0;;) {
    size_t n = sfs.read(*f, at, std::span(reinterpret_cast<uint8_t*>(buf.data()), buf.size()));
    if (n == 0) {
      sfs.close(f);
      return out;
    }
    out.append(buf, 0, n);
    at += n;
  }
}

std::string expected(const std::vector<ContentRef>& refs) {
  std::string out;
  for (const ContentRef& r : refs) {
    if (r.hole) {
      out.append(r.length, '\0');
    } else {
      Bytes b = chunk_content(r.chunk, r.length);
      out.append(b.begin(), b.end());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("FileLayout finds the chunk at an offset by binary search", "[mount]") {
  FileLayout layout({data_ref(100, 1), hole_ref(50), data_ref(0, 2), data_ref(30, 3)});
  REQUIRE(layout.size() == 180);
  REQUIRE(layout.stored_bytes() == 130);
  CHECK(layout.chunk_at(0) == 0u);
  CHECK(layout.chunk_at(99) == 0u);
  CHECK(layout.chunk_at(100) == 1u);
  CHECK(layout.chunk_at(149) == 1u);
  CHECK(layout.chunk_at(150) == 3u);  // the empty chunk holds no byte
  CHECK(layout.chunk_at(179) == 3u);
  CHECK_FALSE(layout.chunk_at(180));

  std::vector<Piece> p = layout.pieces(90, 70);
  REQUIRE(p.size() == 3);
  CHECK((p[0].index == 0 && p[0].offset == 90 && p[0].length == 10 && p[0].out_offset == 0));
  CHECK((p[1].index == 1 && p[1].offset == 0 && p[1].length == 50 && p[1].out_offset == 10));
  CHECK((p[2].index == 3 && p[2].offset == 0 && p[2].length == 10 && p[2].out_offset == 60));
  std::vector<Piece> tail = layout.pieces(170, 1000);  // clipped at the end
  REQUIRE(tail.size() == 1);
  CHECK((tail[0].offset == 20 && tail[0].length == 10));
  CHECK(layout.pieces(180, 10).empty());
  CHECK(FileLayout({}).pieces(0, 10).empty());

  CHECK(layout.next_data(95) == 95u);
  CHECK(layout.next_data(100) == 150u);
  CHECK(layout.next_hole(0) == 100u);
  CHECK(layout.next_hole(160) == 180u);  // the end counts as a hole
  CHECK_FALSE(FileLayout({data_ref(10, 1), hole_ref(10)}).next_data(12));
}

TEST_CASE("FileLayout locates offsets in a 4 GiB file of uneven chunks", "[mount]") {
  std::vector<ContentRef> refs;
  uint64_t total = 0;
  for (uint32_t i = 0; total < (4ull << 30); ++i) {
    uint64_t len = 32768 + (i * 2654435761u) % 65536;  // uneven, as content-defined chunks are
    refs.push_back(data_ref(len, static_cast<uint8_t>(i)));
    total += len;
  }
  FileLayout layout(refs);
  for (uint64_t offset : {uint64_t{0}, uint64_t{2} << 30, total - 1, uint64_t{123456789}}) {
    size_t i = *layout.chunk_at(offset);
    CHECK(layout.start(i) <= offset);
    CHECK(offset < layout.start(i) + refs[i].length);
  }
}

TEST_CASE("LruCache stays within its weight and evicts the least recently used", "[mount]") {
  LruCache<int, std::string> cache(100);
  cache.put(1, std::make_shared<std::string>("a"), 40);
  cache.put(2, std::make_shared<std::string>("b"), 40);
  REQUIRE(cache.get(1));  // 1 is now newer than 2
  cache.put(3, std::make_shared<std::string>("c"), 40);
  CHECK(cache.weight() == 80);
  CHECK(cache.get(1));
  CHECK_FALSE(cache.get(2));
  CHECK(cache.get(3));
  cache.put(4, std::make_shared<std::string>("huge"), 101);  // heavier than it all: not kept
  CHECK_FALSE(cache.get(4));
  CHECK(cache.size() == 2);
  cache.put(3, std::make_shared<std::string>("c2"), 10);  // replacing reweighs
  CHECK(cache.weight() == 50);
  CHECK(*cache.get(3) == "c2");
}

TEST_CASE("ChunkCache fetches each chunk once, in parallel, within its bound", "[mount]") {
  std::atomic<int> fetches{0};
  std::atomic<bool> release{false};
  std::atomic<int> waiting{0};
  ChunkFetch fetch = [&](const Id& id) {
    ++fetches;
    ++waiting;
    while (!release) std::this_thread::yield();
    --waiting;
    if (id.bytes[0] == 0xee) throw Error(ErrorKind::kIntegrity, "damaged chunk");
    return Bytes(1000, id.bytes[0]);
  };
  ChunkCache cache(fetch, 3500, 4, 2);
  Id a, b;
  a.bytes[0] = 1;
  b.bytes[0] = 2;
  auto fa1 = cache.get(a);
  auto fa2 = cache.get(a);  // joins the fetch in flight
  auto fb = cache.get(b);
  while (waiting < 2) std::this_thread::yield();  // both fetches run at once
  release = true;
  CHECK((*fa1.get())[0] == 1);
  CHECK(fa2.get() == fa1.get());
  CHECK((*fb.get())[0] == 2);
  CHECK(fetches == 2);
  CHECK(cache.get(a).get() == fa1.get());  // from memory
  CHECK(fetches == 2);

  for (uint8_t i = 10; i < 30; ++i) {
    Id c;
    c.bytes[0] = i;
    cache.get(c).get();
    CHECK(cache.stats().cached_bytes <= 3500);
  }
  CHECK(cache.stats().cached_bytes == 3000);
  CHECK(cache.stats().fetches == 22);

  Id bad;
  bad.bytes[0] = 0xee;
  CHECK_THROWS_AS(cache.get(bad).get(), Error);
  CHECK_THROWS_AS(cache.get(bad).get(), Error);  // not cached: tried again
  CHECK(fetches == 24);
}

TEST_CASE("SnapshotIndex names snapshots by time, unique, grouped by host and tag", "[mount]") {
  MemorySource src;
  Id root = src.add_tree({});
  auto first = src.snapshot(1'800'000'000, "db1", {"daily"}, root);
  auto twin = src.snapshot(1'800'000'000, "web/1", {"daily", "pre-upgrade"}, root);
  src.snapshot(1'800'003'600, "db1", {}, root);
  SnapshotIndex index(src.records);
  REQUIRE(index.names.size() == 3);
  CHECK(index.names[0] == "2027-01-15T08:00:00Z-" + first.id.short_hex());
  CHECK(index.names[1] == "2027-01-15T08:00:00Z-" + twin.id.short_hex());
  CHECK(index.names[2] == "2027-01-15T09:00:00Z");
  CHECK(index.by_host.at("db1") == std::vector<size_t>{0, 2});
  CHECK(index.by_host.at("web_1") == std::vector<size_t>{1});
  CHECK(index.by_tag.at("daily") == std::vector<size_t>{0, 1});
  CHECK(index.by_tag.at("pre-upgrade") == std::vector<size_t>{1});
}

TEST_CASE("SnapshotFs resolves the top levels and paths inside snapshots", "[mount]") {
  MemorySource src;
  std::vector<ContentRef> mixed = {data_ref(70'000, 1), hole_ref(200'000), data_ref(50'000, 2)};
  Tree docs;
  docs.entries.push_back(src.file("a file with spaces.txt", {data_ref(1234, 3)}));
  docs.entries.push_back(src.file("sparse", mixed));
  docs.entries.push_back(src.file("\xc3\xa9t\xc3\xa9.txt", {}));
  TreeEntry link;
  link.meta.name = "link";
  link.meta.type = NodeType::kSymlink;
  link.meta.symlink_target = "../elsewhere";
  link.meta.xattrs = {{"user.note", {'h', 'i'}}};
  docs.entries.push_back(link);
  docs.entries.push_back(src.file("sneaky/../name", {}));  // no path reaches it: not listed
  std::sort(docs.entries.begin(), docs.entries.end(),
            [](const TreeEntry& x, const TreeEntry& y) { return x.meta.name < y.meta.name; });
  Tree root;
  TreeEntry dir;
  dir.meta.name = "docs";
  dir.meta.type = NodeType::kDir;
  dir.meta.mode = 0750;
  dir.subtree = src.add_tree(docs);
  root.entries.push_back(dir);
  Id root_id = src.add_tree(root);
  src.snapshot(1'800'000'000, "db1", {"daily"}, root_id);
  auto newest = src.snapshot(1'800'003'600, "web", {}, root_id);
  SnapshotFs sfs(src, MountOptions{});
  const std::string snap = "/snapshots/2027-01-15T09:00:00Z";

  CHECK(sfs.resolve("/")->meta.type == NodeType::kDir);
  CHECK(sfs.resolve("/snapshots/latest")->meta.symlink_target == "2027-01-15T09:00:00Z");
  CHECK(sfs.resolve("/hosts/db1/latest")->meta.symlink_target == "../../snapshots/2027-01-15T08:00:00Z");
  CHECK(sfs.resolve("/hosts/db1/2027-01-15T08:00:00Z")->meta.type == NodeType::kSymlink);
  CHECK_FALSE(sfs.resolve("/hosts/db1/2027-01-15T09:00:00Z"));  // another host's
  CHECK(sfs.resolve("/tags/daily/latest")->meta.symlink_target == "../../snapshots/2027-01-15T08:00:00Z");
  CHECK(sfs.resolve("/ids/" + newest.id.short_hex())->meta.symlink_target == "../snapshots/2027-01-15T09:00:00Z");
  CHECK(sfs.resolve(snap)->meta.mtime_ns == newest.time_ns);
  CHECK(sfs.resolve(snap + "/docs")->meta.mode == 0750);
  CHECK(sfs.resolve(snap + "//docs/a file with spaces.txt/")->meta.size == 1234);
  CHECK(sfs.resolve(snap + "/docs/\xc3\xa9t\xc3\xa9.txt"));
  CHECK(sfs.resolve(snap + "/docs/link")->meta.xattrs.size() == 1);
  for (const char* missing : {"/nothing", "/snapshots/2020-01-01T00:00:00Z", "/hosts/nobody", "/tags/daily/x/y",
                              "/ids/00000000"}) {
    CHECK_FALSE(sfs.resolve(missing));
  }
  CHECK_FALSE(sfs.resolve(snap + "/docs/sparse/below-a-file"));
  CHECK_FALSE(sfs.resolve(snap + "/docs/absent"));
  CHECK_FALSE(sfs.open(snap + "/docs"));

  auto names = [&](const std::string& path) {
    std::vector<std::string> out;
    REQUIRE(sfs.list(path, [&](const TreeEntry& e) { out.push_back(e.meta.name); }));
    return out;
  };
  CHECK(names("/") == std::vector<std::string>{"snapshots", "hosts", "tags", "ids"});
  CHECK(names("/snapshots") == std::vector<std::string>{"2027-01-15T08:00:00Z", "2027-01-15T09:00:00Z", "latest"});
  CHECK(names("/hosts") == std::vector<std::string>{"db1", "web"});
  CHECK(names("/tags/daily") == std::vector<std::string>{"2027-01-15T08:00:00Z", "latest"});
  CHECK(names(snap + "/docs") ==
        std::vector<std::string>{"a file with spaces.txt", "link", "sparse", "\xc3\xa9t\xc3\xa9.txt"});
  CHECK_FALSE(sfs.list(snap + "/docs/sparse", [](const TreeEntry&) {}));

  struct stat st = sfs.attributes(*sfs.resolve(snap + "/docs/sparse"));
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(st.st_uid == 1000);
  CHECK(st.st_size == 320'000);
  CHECK(st.st_blocks == (120'000 + 511) / 512);  // the hole takes no room
  CHECK(st.st_mtim.tv_sec == 1'700'000'000);
  CHECK(st.st_mtim.tv_nsec == 123'456'789);
  CHECK(S_ISLNK(sfs.attributes(*sfs.resolve(snap + "/docs/link")).st_mode));

  CHECK(read_all(sfs, snap + "/docs/sparse") == expected(mixed));
  CHECK(read_all(sfs, snap + "/docs/sparse", 4096) == expected(mixed));
  CHECK(read_all(sfs, snap + "/docs/\xc3\xa9t\xc3\xa9.txt").empty());
}

TEST_CASE("SnapshotFs picks up new snapshots from the catalog", "[mount]") {
  MemorySource src;
  Id root = src.add_tree({});
  src.snapshot(1'800'000'000, "a", {}, root);
  MountOptions options;
  options.refresh = std::chrono::milliseconds(0);
  SnapshotFs sfs(src, options);
  CHECK_FALSE(sfs.resolve("/hosts/b"));
  src.snapshot(1'800'000'100, "b", {}, root);
  CHECK(sfs.resolve("/hosts/b"));
  CHECK(sfs.resolve("/snapshots/latest")->meta.symlink_target == "2027-01-15T08:01:40Z");
}

TEST_CASE("A read from the middle of a 4 GiB file fetches only the chunks it covers", "[mount]") {
  MemorySource src;
  std::vector<ContentRef> refs;
  for (uint32_t i = 0; i < 4096; ++i) {
    ContentRef r = data_ref(1 << 20, static_cast<uint8_t>(i));
    r.chunk.bytes[2] = static_cast<uint8_t>(i >> 8);
    refs.push_back(r);
  }
  Tree root;
  root.entries.push_back(src.file("big", refs));
  src.snapshot(1'800'000'000, "h", {}, src.add_tree(root));
  MountOptions options;
  options.read_ahead = 4 << 20;
  SnapshotFs sfs(src, options);
  FileHandle* f = sfs.open("/snapshots/2027-01-15T08:00:00Z/big");
  REQUIRE(f);
  uint64_t offset = (2ull << 30) + 12345;
  Bytes buf(1 << 20);
  REQUIRE(sfs.read(*f, offset, buf) == buf.size());
  CHECK(src.chunk_reads == 2);  // not sequential: nothing read ahead
  size_t i = 2048;
  Bytes first = chunk_content(refs[i].chunk, 1 << 20), second = chunk_content(refs[i + 1].chunk, 1 << 20);
  CHECK(std::equal(buf.begin(), buf.begin() + ((1 << 20) - 12345), first.begin() + 12345));
  CHECK(std::equal(buf.begin() + ((1 << 20) - 12345), buf.end(), second.begin()));

  // Going on from there is sequential: the next chunks are fetched ahead.
  REQUIRE(sfs.read(*f, offset + buf.size(), buf) == buf.size());
  for (int spin = 0; spin < 1000 && sfs.cache().stats().fetches < 6; ++spin) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(sfs.cache().stats().fetches >= 6);
  CHECK(sfs.cache().stats().cached_bytes <= options.cache_bytes);
  // `f` stays open: a file the kernel never released goes with the file system (ASan checks).
}

TEST_CASE("SnapshotFs reads a real repository's files back", "[mount]") {
  test::TempDir dir("keel-mount-test");
  RepoConfig config;
  config.chunker = {1024, 4096, 16384};
  auto repo = Repository::init(targets::local::open_local_target((dir.path / "repo").string(), true), config,
                               {"secret", (dir.path / "state" / "catalog.db").string()});
  fs::path src = dir.path / "src";
  fs::create_directories(src / "sub dir");
  std::map<std::string, Bytes> files = {{"one.bin", test::random_bytes(100'000, 1)},
                                        {"sub dir/two.bin", test::random_bytes(33'333, 2)},
                                        {"empty", {}}};
  for (const auto& [name, data] : files) {
    std::ofstream(src / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }
  BackupOptions options;
  options.workers = 2;
  options.host = "testhost";
  options.tags = {"unit"};
  BackupProgress progress;
  auto source = agents::fs::make_fs_source({src.string()}, {});
  catalog::SnapshotRecord snap = run_backup(*repo, *source, options, progress).snapshot;

  std::unique_ptr<MountSource> mount_source = repository_source(*repo);
  MountOptions mount_options;
  mount_options.cache_bytes = 64 << 10;  // smaller than the data: evictions on the way
  SnapshotFs sfs(*mount_source, mount_options);
  std::string link = sfs.resolve("/tags/unit/latest")->meta.symlink_target;
  REQUIRE(link.rfind("../../snapshots/", 0) == 0);
  std::string base = "/snapshots/" + link.substr(16) + src.string();
  for (const auto& [name, data] : files) {
    INFO(name);
    CHECK(read_all(sfs, base + "/" + name, 7000) == std::string(data.begin(), data.end()));
  }
  CHECK(sfs.resolve("/hosts/testhost/latest"));
  CHECK(sfs.resolve("/ids/" + snap.id.short_hex()));
  CHECK(sfs.cache().stats().cached_bytes <= mount_options.cache_bytes);
}
