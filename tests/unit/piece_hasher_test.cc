#include "engine/piece_hasher.h"

#include <fcntl.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "temp_dir.h"
#include "util/error.h"
#include "util/fd.h"

using keel::Bytes;
using keel::ByteView;
using keel::Error;
using keel::Hash128;
using keel::UniqueFd;
using keel::engine::ContentRef;
using keel::engine::EarlyPieceMemory;
using keel::engine::PieceHasher;

namespace {

// A file's layout: data pieces of the given sizes, and holes where a size is negative.
struct Layout {
  std::vector<ContentRef> refs;
  std::vector<uint64_t> offsets;
  Bytes content;  // the whole file, holes as zeros
};

Layout make_layout(const std::vector<int64_t>& sizes, uint32_t seed) {
  std::mt19937 rng(seed);
  Layout l;
  for (int64_t s : sizes) {
    ContentRef ref;
    ref.hole = s < 0;
    ref.length = static_cast<uint64_t>(s < 0 ? -s : s);
    l.offsets.push_back(l.content.size());
    for (uint64_t i = 0; i < ref.length; ++i) l.content.push_back(ref.hole ? 0 : static_cast<uint8_t>(rng()));
    l.refs.push_back(ref);
  }
  return l;
}

// Writes the data pieces in `order` (indexes into the layout) to a fresh
// file, telling the hasher after each; returns finish().
std::optional<Hash128> write_in_order(const Layout& l, const std::vector<size_t>& order, const std::string& path,
                                      Bytes* corrupt_on_disk = nullptr, EarlyPieceMemory* memory = nullptr) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600));
  REQUIRE(fd);
  REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(l.content.size())) == 0);
  PieceHasher hasher(l.refs, memory);
  for (size_t i : order) {
    ByteView piece(l.content.data() + l.offsets[i], l.refs[i].length);
    ByteView on_disk = corrupt_on_disk ? ByteView(corrupt_on_disk->data() + l.offsets[i], l.refs[i].length) : piece;
    keel::pwrite_all(fd.get(), on_disk, static_cast<off_t>(l.offsets[i]), "write");
    hasher.written([&](std::span<uint8_t> out, uint64_t offset) {
      return keel::pread_full(fd.get(), out, static_cast<off_t>(offset), "read back " + path);
    }, l.offsets[i], on_disk);
  }
  return hasher.finish();
}

std::vector<size_t> data_pieces(const Layout& l) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < l.refs.size(); ++i) {
    if (!l.refs[i].hole) idx.push_back(i);
  }
  return idx;
}

}  // namespace

TEST_CASE("piece hasher gives the whole file's hash whatever the order", "[piece_hasher]") {
  keel::test::TempDir dir;
  const std::vector<std::vector<int64_t>> layouts = {
      {5000},                                   // one piece
      {4096, 100, 7000, 1},                     // several
      {-3000, 2048, -10, 4000, -5000},          // holes first, between and last
      {600000, -1000, 700000, 300000},          // pieces read back in several slices
      {-8192},                                  // nothing but a hole
      {},                                       // empty
  };
  uint32_t seed = 1;
  for (const auto& sizes : layouts) {
    Layout l = make_layout(sizes, seed++);
    const Hash128 expected = keel::xxh3_128(l.content);
    std::vector<size_t> order = data_pieces(l);
    std::mt19937 rng(seed);
    for (int round = 0; round < 6; ++round) {
      INFO("layout of " << sizes.size() << " parts, round " << round);
      auto got = write_in_order(l, order, dir.file("f"));
      REQUIRE(got.has_value());
      CHECK(*got == expected);
      std::shuffle(order.begin(), order.end(), rng);
    }
  }
}

TEST_CASE("piece hasher reads nothing back for pieces written in order", "[piece_hasher]") {
  Layout l = make_layout({1000, -500, 2000, 300}, 7);
  PieceHasher hasher(l.refs);
  for (size_t i : data_pieces(l)) {
    auto no_read_back = [](std::span<uint8_t>, uint64_t) -> size_t { throw std::logic_error("read back"); };
    hasher.written(no_read_back, l.offsets[i], ByteView(l.content.data() + l.offsets[i], l.refs[i].length));
  }
  auto got = hasher.finish();
  REQUIRE(got.has_value());
  CHECK(*got == keel::xxh3_128(l.content));
}

TEST_CASE("piece hasher sees a missing piece and a wrong one", "[piece_hasher]") {
  keel::test::TempDir dir;
  Layout l = make_layout({1000, 2000, 3000}, 9);
  CHECK_FALSE(write_in_order(l, {0, 2}, dir.file("f")).has_value());  // the middle never came

  // Out of order, so the bad piece is hashed from what the disk holds.
  Bytes disk = l.content;
  disk[l.offsets[2] + 10] ^= 1;
  auto got = write_in_order(l, {2, 1, 0}, dir.file("g"), &disk);
  REQUIRE(got.has_value());
  CHECK(*got != keel::xxh3_128(l.content));
}

TEST_CASE("piece hasher holds early pieces in memory, and reads back what its memory cannot hold", "[piece_hasher]") {
  keel::test::TempDir dir;
  // Three blocks' worth arriving before the first piece.
  const int64_t kPiece = 700000;
  Layout l = make_layout({1000, kPiece, -4096, kPiece, kPiece, 3 * kPiece, kPiece}, 11);
  std::vector<size_t> reversed = data_pieces(l);
  std::reverse(reversed.begin(), reversed.end());
  const Hash128 expected = keel::xxh3_128(l.content);

  // Memory enough: the copies are hashed and nothing is read back.
  EarlyPieceMemory enough(8 * EarlyPieceMemory::kBlock);
  PieceHasher hasher(l.refs, &enough);
  for (size_t i : reversed) {
    auto no_read_back = [](std::span<uint8_t>, uint64_t) -> size_t { throw std::logic_error("read back"); };
    hasher.written(no_read_back, l.offsets[i], ByteView(l.content.data() + l.offsets[i], l.refs[i].length));
  }
  auto got = hasher.finish();
  REQUIRE(got.has_value());
  CHECK(*got == expected);
  // Every block came back: the next hasher can hold as much.
  for (int i = 0; i < 8; ++i) CHECK(enough.block() != nullptr);

  // One block, taken by the last piece (the first to arrive): the others
  // are read back from the disk, where a corrupted byte is seen.
  EarlyPieceMemory one_block(EarlyPieceMemory::kBlock);
  auto whole = write_in_order(l, reversed, dir.file("f"), nullptr, &one_block);
  REQUIRE(whole.has_value());
  CHECK(*whole == expected);
  Bytes disk = l.content;
  disk[l.offsets[1] + 5] ^= 1;
  EarlyPieceMemory another_block(EarlyPieceMemory::kBlock);
  auto corrupt = write_in_order(l, reversed, dir.file("g"), &disk, &another_block);
  REQUIRE(corrupt.has_value());
  CHECK(*corrupt != expected);
}
