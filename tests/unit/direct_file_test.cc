#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "targets/local/direct_file.h"
#include "tests/unit/temp_dir.h"
#include "tests/unit/test_support.h"
#include "util/error.h"
#include "util/fd.h"

using namespace keel;
using keel::targets::local::DirectFile;

namespace {

// Pieces of `data` cut at random (mostly unaligned) offsets, written in a
// shuffled order from several threads, as a pack's parts arrive.
void write_shuffled(DirectFile& file, const Bytes& data, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> cuts{0, data.size()};
  for (int i = 0; i < 40; ++i) cuts.push_back(rng() % data.size());
  cuts.push_back(DirectFile::kBlock * 3);      // an aligned cut
  cuts.push_back(DirectFile::kBlock * 5 + 1);  // and pieces inside one block
  cuts.push_back(DirectFile::kBlock * 5 + 7);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<std::pair<size_t, size_t>> pieces;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) pieces.emplace_back(cuts[i], cuts[i + 1] - cuts[i]);
  std::shuffle(pieces.begin(), pieces.end(), rng);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < pieces.size(); i += 4) {
        file.write(ByteView(data).subspan(pieces[i].first, pieces[i].second), pieces[i].first);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  file.finish();
}

}  // namespace

TEST_CASE("direct file: pieces at any offsets, in any order, make the file", "[direct_file]") {
  test::TempDir dir;
  // Not a multiple of the block size: the last block goes through the page cache.
  const Bytes data = test::random_bytes(DirectFile::kBlock * 300 + 1234, 7);
  for (bool direct : {true, false}) {
    INFO("direct: " << direct);
    const std::string path = dir.file(direct ? "direct" : "buffered");
    {
      DirectFile file(path, direct);
      // Where the file system allows O_DIRECT (not tmpfs), it is used.
      if (!direct) CHECK_FALSE(file.direct());
      write_shuffled(file, data, direct ? 1 : 2);
    }
    CHECK(std::filesystem::file_size(path) == data.size());
    CHECK(read_file(path) == data);
  }
}

TEST_CASE("direct file: reads back what was written, from disk or from its partial blocks", "[direct_file]") {
  test::TempDir dir;
  const Bytes data = test::random_bytes(DirectFile::kBlock * 40 + 555, 11);
  std::mt19937_64 rng(5);
  std::vector<size_t> cuts{0, data.size(), DirectFile::kBlock * 2, DirectFile::kBlock * 7 + 3, DirectFile::kBlock * 7 + 9};
  for (int i = 0; i < 25; ++i) cuts.push_back(rng() % data.size());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<std::pair<size_t, size_t>> pieces;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) pieces.emplace_back(cuts[i], cuts[i + 1] - cuts[i]);
  std::shuffle(pieces.begin(), pieces.end(), rng);
  for (bool direct : {true, false}) {
    INFO("direct: " << direct);
    const std::string path = dir.file(direct ? "direct" : "buffered");
    // Adopted, as restore creates its files: open for reading too, and sized.
    UniqueFd fd = open_or_throw(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(data.size())) == 0);
    DirectFile file(std::move(fd), path, direct);
    for (size_t n = 0; n < pieces.size(); ++n) {
      file.write(ByteView(data).subspan(pieces[n].first, pieces[n].second), pieces[n].first);
      // Every piece written so far, whose blocks may still be partial.
      for (size_t k = 0; k <= n; ++k) {
        Bytes back(pieces[k].second);
        file.read(back, pieces[k].first);
        REQUIRE(back == Bytes(data.begin() + pieces[k].first, data.begin() + pieces[k].first + pieces[k].second));
      }
    }
    file.finish();
    Bytes all(data.size());
    file.read(all, 0);
    CHECK(all == data);
    file.close();
    CHECK(read_file(path) == data);
  }
}

TEST_CASE("direct file: a file of less than a block", "[direct_file]") {
  test::TempDir dir;
  const Bytes data = test::random_bytes(100, 3);
  {
    DirectFile file(dir.file("small"), true);
    file.write(ByteView(data).first(60), 0);
    file.write(ByteView(data).subspan(60), 60);
    file.finish();
  }
  CHECK(read_file(dir.file("small")) == data);
}

TEST_CASE("direct file: refuses a path that exists", "[direct_file]") {
  test::TempDir dir;
  write_file_atomic(dir.file("there"), Bytes{1, 2, 3});
  CHECK_THROWS_AS(DirectFile(dir.file("there"), true), Error);
}

TEST_CASE("direct file: on tmpfs, with or without O_DIRECT, the file is right", "[direct_file]") {
  // tmpfs refuses O_DIRECT before Linux 6.6 (the open fails with EINVAL and
  // the file is written through the page cache) and takes it since.
  const std::filesystem::path shm = "/dev/shm";
  if (!std::filesystem::is_directory(shm)) return;  // no tmpfs to try
  const std::string path = (shm / ("keel-direct-" + Id::random().short_hex())).string();
  const Bytes data = test::random_bytes(DirectFile::kBlock * 20 + 5, 9);
  {
    DirectFile file(path, true);
    write_shuffled(file, data, 3);
  }
  CHECK(read_file(path) == data);
  std::filesystem::remove(path);
}
