// The backup walker's read buffers (engine/backup.h, read_buffer_size and
// read_buffer_count): as small and as few as keep the workers busy, since
// each is fresh memory the kernel clears once per process; and however often a file's unchunked tail
// is carried to a fresh buffer, its chunks are the ones the chunker cuts from
// the whole file at once (the repository's bytes do not depend on buffers).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "agents/fs/fs_source.h"
#include "engine/backup.h"
#include "engine/chunker.h"
#include "targets/memory/memory_target.h"
#include "tests/unit/test_support.h"
#include "util/huge_pages.h"

using namespace keel;
using namespace keel::engine;

TEST_CASE("read buffers hold one max-size chunk and one read, in whole huge pages", "[backup]") {
  constexpr size_t kMiB = size_t{1} << 20;
  // The default 8 MiB chunks: 10 MiB, where twice the chunk (16 MiB) was
  // 6 MiB more fresh memory per buffer.
  CHECK(read_buffer_size(ChunkerParams{}) == 10 * kMiB);
  for (uint32_t max : {64u << 10, 1u << 20, 3u << 20, 8u << 20, 16u << 20}) {
    ChunkerParams params;
    params.max_size = max;
    const size_t size = read_buffer_size(params);
    CHECK(size % kHugePageSize == 0);
    CHECK(size >= max + 2 * kMiB);
    CHECK(size < max + 2 * kMiB + kHugePageSize);
  }
}

TEST_CASE("a backup has two read buffers more than workers, within half its memory budget", "[backup]") {
  constexpr size_t kMiB = size_t{1} << 20;
  CHECK(read_buffer_count(10 * kMiB, 2, 256 * kMiB) == 4);
  CHECK(read_buffer_count(10 * kMiB, 16, 256 * kMiB) == 14);
  CHECK(read_buffer_count(10 * kMiB, 2, 32 * kMiB) == 3);
  CHECK(read_buffer_count(10 * kMiB, 2, 8 * kMiB) == 2);
}

namespace {

std::vector<uint64_t> chunk_lengths(const Chunker& chunker, ByteView data) {
  std::vector<uint64_t> lengths;
  while (!data.empty()) {
    const size_t n = chunker.next_cut(data, /*final=*/true);
    lengths.push_back(n);
    data = data.subspan(n);
  }
  return lengths;
}

}  // namespace

TEST_CASE("files read across several read buffers are cut as if read whole", "[backup]") {
  test::TempDir dir("keel-read-buffers");
  RepoConfig config;
  config.chunker = ChunkerParams{.min_size = 16 << 10, .avg_size = 64 << 10, .max_size = 256 << 10};
  const std::string catalog = dir.file("catalog.db");
  auto store = std::make_shared<targets::memory::MemoryStore>();
  Repository::init(targets::memory::open_memory_target(store), config, {"secret", catalog});
  auto repo = Repository::open(targets::memory::open_memory_target(store), {"secret", catalog});
  REQUIRE(read_buffer_size(config.chunker) == 4u << 20);

  // Small files fill a buffer up to where a large one no longer fits and
  // moves on with its tail; the large ones span two buffers or more.
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  std::map<std::string, Bytes> files;
  uint64_t seed = 1;
  for (size_t size : {300'000, 9'500'000, 150'000, 3'900'000, 6'345'678, 70'000, 5'000'001}) {
    for (int i = 0; i < 3; ++i, ++seed) {
      const std::string name = "f" + std::to_string(seed);
      files[name] = test::random_bytes(size / (i + 1), seed);
      std::ofstream(src + "/" + name, std::ios::binary)
          .write(reinterpret_cast<const char*>(files[name].data()), static_cast<std::streamsize>(files[name].size()));
    }
  }

  BackupOptions options;
  options.copy_catalog = false;
  BackupProgress progress;
  auto source = agents::fs::make_fs_source({src}, {});
  const BackupResult result = run_backup(*repo, *source, options, progress);

  Tree tree = repo->load_tree(result.snapshot.root);
  for (const auto& part : std::filesystem::path(src).relative_path()) {
    const TreeEntry* entry = tree.find(part.string());
    REQUIRE(entry);
    tree = repo->load_tree(entry->subtree);
  }
  const Chunker chunker(config.chunker, repo->keys().chunker);
  REQUIRE(tree.entries.size() == files.size());
  for (const TreeEntry& entry : tree.entries) {
    INFO(entry.meta.name);
    std::vector<uint64_t> stored;
    for (const ContentRef& ref : entry.content) {
      CHECK_FALSE(ref.hole);
      stored.push_back(ref.length);
    }
    CHECK(stored == chunk_lengths(chunker, files.at(entry.meta.name)));
  }
}
