#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

#include "engine/chunker.h"
#include "util/checksum.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;

namespace {

const ChunkerParams kSmall{2048, 8192, 65536};

// The same bytes on every platform (std::mt19937_64 is fully specified).
Bytes random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes data(size);
  uint64_t word = 0;
  for (size_t i = 0; i < size; ++i) {
    if (i % 8 == 0) word = rng();
    data[i] = static_cast<uint8_t>(word >> (8 * (i % 8)));
  }
  return data;
}

Bytes secret_of(uint8_t fill) { return Bytes(32, fill); }

// Chunk lengths from scanning the whole buffer at once.
std::vector<size_t> chunk_lengths(const Chunker& chunker, ByteView data) {
  std::vector<size_t> lengths;
  for (size_t pos = 0; pos < data.size();) {
    const size_t cut = chunker.next_cut(data.subspan(pos), true);
    REQUIRE(cut > 0);
    lengths.push_back(cut);
    pos += cut;
  }
  return lengths;
}

// Content fingerprints of the chunks, to compare two versions of a stream.
std::multiset<uint64_t> chunk_hashes(const Chunker& chunker, ByteView data) {
  std::multiset<uint64_t> hashes;
  size_t pos = 0;
  for (size_t length : chunk_lengths(chunker, data)) {
    hashes.insert(xxh3_64(data.subspan(pos, length)));
    pos += length;
  }
  return hashes;
}

size_t count_missing(const std::multiset<uint64_t>& from, const std::multiset<uint64_t>& in) {
  return static_cast<size_t>(
      std::count_if(from.begin(), from.end(), [&](uint64_t hash) { return in.count(hash) == 0; }));
}

double mean(const std::vector<size_t>& lengths) {
  double total = 0;
  for (size_t length : lengths) total += static_cast<double>(length);
  return total / static_cast<double>(lengths.size());
}

}  // namespace

TEST_CASE("chunk sizes stay within min and max, the last one excepted", "[chunker]") {
  const Chunker chunker(kSmall, secret_of(1));
  const Bytes data = random_bytes(8 << 20, 1);
  const auto lengths = chunk_lengths(chunker, data);
  REQUIRE(lengths.size() > 100);
  for (size_t i = 0; i + 1 < lengths.size(); ++i) {
    INFO("chunk " << i);
    CHECK(lengths[i] >= kSmall.min_size);
    CHECK(lengths[i] <= kSmall.max_size);
  }
  CHECK(lengths.back() <= kSmall.max_size);
}

TEST_CASE("data without cut points is cut at max into equal chunks", "[chunker]") {
  const Chunker chunker(kSmall, secret_of(1));
  // A constant run gives a constant fingerprint after 64 bytes: either no cut
  // point at all or the same one in every chunk. Either way, equal chunks.
  const Bytes zeros(1 << 20, 0);
  const auto lengths = chunk_lengths(chunker, zeros);
  REQUIRE(lengths.size() > 2);
  for (size_t i = 0; i + 1 < lengths.size(); ++i) CHECK(lengths[i] == lengths[0]);
  CHECK(lengths[0] <= kSmall.max_size);
}

TEST_CASE("average chunk size is close to avg on random data", "[chunker]") {
  // Cuts are 4x rarer than 1/avg before avg and 4x likelier after it, and
  // nothing is cut before min, so the mean lands a little above avg.
  SECTION("small sizes") {
    const Chunker chunker(kSmall, secret_of(2));
    const double average = mean(chunk_lengths(chunker, random_bytes(16 << 20, 2)));
    CHECK(average > 0.9 * kSmall.avg_size);
    CHECK(average < 1.4 * kSmall.avg_size);
  }
  SECTION("default sizes") {
    const ChunkerParams params;
    const Chunker chunker(params, secret_of(2));
    const auto lengths = chunk_lengths(chunker, random_bytes(64 << 20, 3));
    const double average = mean(std::vector<size_t>(lengths.begin(), lengths.end() - 1));
    CHECK(average > 0.8 * params.avg_size);
    CHECK(average < 1.6 * params.avg_size);
  }
}

TEST_CASE("cuts are deterministic and depend on the secret", "[chunker]") {
  const Bytes data = random_bytes(4 << 20, 4);
  const auto first = chunk_lengths(Chunker(kSmall, secret_of(7)), data);
  CHECK(chunk_lengths(Chunker(kSmall, secret_of(7)), data) == first);

  const Chunker other(kSmall, secret_of(8));
  std::vector<size_t> first_offsets, other_offsets;
  size_t pos = 0;
  for (size_t length : first) first_offsets.push_back(pos += length);
  pos = 0;
  for (size_t length : chunk_lengths(other, data)) other_offsets.push_back(pos += length);
  std::vector<size_t> shared;
  std::set_intersection(first_offsets.begin(), first_offsets.end(), other_offsets.begin(), other_offsets.end(),
                        std::back_inserter(shared));
  // Only the end of the data is certain to be shared.
  CHECK(shared.size() < first_offsets.size() / 10);
}

TEST_CASE("cut points are pinned for a fixed secret and input", "[chunker]") {
  // Changing them breaks deduplication against existing repositories. The
  // values were checked against a plain one-byte-at-a-time gear scan.
  Bytes secret(32);
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i);
  const auto lengths = chunk_lengths(Chunker(ChunkerParams{2049, 8192, 65536}, secret), random_bytes(1 << 20, 42));
  REQUIRE(lengths.size() > 5);
  CHECK(std::vector<size_t>(lengths.begin(), lengths.begin() + 5) ==
        std::vector<size_t>{4814, 10158, 8427, 6804, 2315});
}

TEST_CASE("an insertion or deletion changes only the chunks around it", "[chunker]") {
  const Chunker chunker(ChunkerParams{}, secret_of(3));
  const Bytes original = random_bytes(64 << 20, 5);
  const auto original_hashes = chunk_hashes(chunker, original);
  const size_t middle = original.size() / 2;

  SECTION("one byte inserted") {
    Bytes edited = original;
    edited.insert(edited.begin() + static_cast<ptrdiff_t>(middle), uint8_t{0x42});
    const auto edited_hashes = chunk_hashes(chunker, edited);
    CHECK(count_missing(edited_hashes, original_hashes) <= 3);
    CHECK(count_missing(original_hashes, edited_hashes) <= 3);
    CHECK(count_missing(edited_hashes, original_hashes) >= 1);
  }
  SECTION("one byte deleted") {
    Bytes edited = original;
    edited.erase(edited.begin() + static_cast<ptrdiff_t>(middle));
    const auto edited_hashes = chunk_hashes(chunker, edited);
    CHECK(count_missing(edited_hashes, original_hashes) <= 3);
    CHECK(count_missing(original_hashes, edited_hashes) <= 3);
    CHECK(count_missing(edited_hashes, original_hashes) >= 1);
  }
}

TEST_CASE("feeding the data in pieces gives the one-shot cuts", "[chunker]") {
  const Chunker chunker(kSmall, secret_of(4));
  const Bytes data = random_bytes(3 << 20, 6);
  const auto expected = chunk_lengths(chunker, data);

  std::mt19937_64 rng(9);
  std::vector<size_t> streamed;
  Bytes pending;  // fed but not yet cut
  for (size_t fed = 0; fed < data.size();) {
    const size_t piece = std::min<size_t>(1 + rng() % 20000, data.size() - fed);
    pending.insert(pending.end(), data.begin() + static_cast<ptrdiff_t>(fed),
                   data.begin() + static_cast<ptrdiff_t>(fed + piece));
    fed += piece;
    size_t consumed = 0;
    while (size_t cut = chunker.next_cut(ByteView(pending).subspan(consumed), false)) {
      streamed.push_back(cut);
      consumed += cut;
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(consumed));
  }
  size_t consumed = 0;
  while (consumed < pending.size()) {
    const size_t cut = chunker.next_cut(ByteView(pending).subspan(consumed), true);
    REQUIRE(cut > 0);
    streamed.push_back(cut);
    consumed += cut;
  }
  CHECK(streamed == expected);
}

TEST_CASE("next_cut asks for more data until the stream ends", "[chunker]") {
  const Chunker chunker(kSmall, secret_of(5));
  const Bytes data = random_bytes(kSmall.max_size + 1, 7);
  const ByteView view(data);
  CHECK(chunker.next_cut(view.first(0), true) == 0);
  CHECK(chunker.next_cut(view.first(100), false) == 0);
  CHECK(chunker.next_cut(view.first(100), true) == 100);
  CHECK(chunker.next_cut(view.first(kSmall.min_size), false) == 0);
  CHECK(chunker.next_cut(view.first(kSmall.min_size), true) == kSmall.min_size);
  // With max bytes or more at hand the answer is final either way.
  const size_t cut = chunker.next_cut(view, false);
  CHECK(cut >= kSmall.min_size);
  CHECK(cut <= kSmall.max_size);
  CHECK(chunker.next_cut(view, true) == cut);
  // A shorter buffer that still holds the cut point finds the same cut.
  CHECK(chunker.next_cut(view.first(cut), false) == cut);
  CHECK(chunker.next_cut(view.first(cut - 1), false) == 0);
}

TEST_CASE("chunker parameters are validated", "[chunker]") {
  CHECK_NOTHROW(ChunkerParams{}.validate());
  CHECK_NOTHROW(kSmall.validate());
  const ChunkerParams bad[] = {
      {32, 8192, 65536},     // min below 64
      {8192, 8192, 65536},   // min not below avg
      {2048, 65536, 65536},  // avg not below max
      {2048, 6000, 65536},   // avg not a power of two
  };
  for (const ChunkerParams& params : bad) {
    INFO(params.min_size << "/" << params.avg_size << "/" << params.max_size);
    try {
      params.validate();
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kUsage);
      CHECK(std::string(e.what()).find("chunker") != std::string::npos);
    }
    CHECK_THROWS_AS(Chunker(params, secret_of(1)), Error);
  }
}
