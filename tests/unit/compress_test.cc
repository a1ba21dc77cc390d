#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "engine/compress.h"
#include "engine/open_into.h"
#include "tests/unit/test_support.h"
#include "util/error.h"

using namespace keel;
using namespace keel::engine;

namespace {

using test::random_bytes;

// Words drawn at random from a small vocabulary: compresses about 3:1.
Bytes text_bytes(size_t size, uint64_t seed) {
  static const char* const kWords[] = {"backup", "chunk", "the", "of", "repository", "snapshot", "and",
                                       "restore", "a", "keel", "pack", "index", "to", "file", "data"};
  std::mt19937_64 rng(seed);
  std::string text;
  while (text.size() < size) {
    text += kWords[rng() % std::size(kWords)];
    text += rng() % 12 == 0 ? ".\n" : " ";
  }
  text.resize(size);
  return Bytes(text.begin(), text.end());
}

Bytes round_trip(ByteView frame, size_t raw_length) {
  Bytes out;
  decompress(frame, raw_length, out, "test chunk");
  return out;
}

ErrorKind decompress_failure(ByteView frame, size_t raw_length) {
  Bytes out;
  try {
    decompress(frame, raw_length, out, "chunk 99");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("chunk 99") != std::string::npos);
    return e.kind();
  }
  FAIL("decompressed");
  return ErrorKind::kFailure;
}

}  // namespace

TEST_CASE("text compresses and round-trips", "[compress]") {
  Compressor compressor(3);
  // Below and above the size at which the incompressibility probe runs.
  for (size_t size : {1000, 4096, 60000, 1 << 20}) {
    INFO(size << " bytes of text");
    const Bytes text = text_bytes(size, size);
    Bytes frame;
    REQUIRE(compressor.compress(text, frame));
    CHECK(frame.size() < text.size() / 2);
    CHECK(round_trip(frame, text.size()) == text);
  }
}

TEST_CASE("compress appends to the output", "[compress]") {
  Compressor compressor(3);
  const Bytes text = text_bytes(200000, 1);
  Bytes out{7, 7, 7};
  REQUIRE(compressor.compress(text, out));
  CHECK(out[0] == 7);
  CHECK(round_trip(ByteView(out).subspan(3), text.size()) == text);
}

TEST_CASE("the frame view holds the frame the appending call appends", "[compress]") {
  // Large, then small, then random, then small again: each view is of the
  // compressor's one buffer, sized by the larger chunk before it.
  const Bytes inputs[] = {text_bytes(1 << 20, 5), text_bytes(5000, 6), random_bytes(100000, 7), text_bytes(3000, 8)};
  Compressor viewing(1), appending(1);
  for (const Bytes& input : inputs) {
    INFO(input.size() << " bytes");
    const std::optional<ByteView> frame = viewing.compress(input);
    Bytes appended;
    const bool shrank = appending.compress(input, appended);
    REQUIRE(frame.has_value() == shrank);
    if (!frame) continue;
    CHECK(frame->size() < input.size());
    CHECK(Bytes(frame->begin(), frame->end()) == appended);
    CHECK(round_trip(*frame, input.size()) == input);
  }
}

TEST_CASE("decompress_into reuses one buffer for chunks of varying sizes", "[compress]") {
  // Large, small, large again: each result is the front of the one buffer,
  // which keeps its size (nothing zero-filled again on the way back up).
  const Bytes inputs[] = {text_bytes(3 << 20, 11), text_bytes(4000, 12), text_bytes(1 << 20, 13)};
  Compressor compressor(1);
  Bytes buffer;
  const uint8_t* front = nullptr;
  for (const Bytes& input : inputs) {
    INFO(input.size() << " bytes");
    Bytes frame;
    REQUIRE(compressor.compress(input, frame));
    const ByteView out = decompress_into(frame, input.size(), buffer, "test chunk");
    CHECK(Bytes(out.begin(), out.end()) == input);
    CHECK(out.data() == buffer.data());
    CHECK(buffer.size() >= (3u << 20));
    if (front) CHECK(buffer.data() == front);  // grown once, for the first
    front = buffer.data();
  }
  const Bytes text = inputs[1];
  Bytes frame;
  REQUIRE(compressor.compress(text, frame));
  CHECK_THROWS_AS(decompress_into(frame, text.size() + 1, buffer, "x"), Error);
  CHECK(buffer.empty());  // nothing of a failed frame left to read
}

TEST_CASE("the configured level is used", "[compress]") {
  const Bytes text = text_bytes(1 << 20, 2);
  Bytes fast, strong;
  REQUIRE(Compressor(1).compress(text, fast));
  REQUIRE(Compressor(19).compress(text, strong));
  CHECK(strong.size() < fast.size());
  CHECK(round_trip(strong, text.size()) == text);
  CHECK_THROWS_AS(Compressor(1000), Error);
}

TEST_CASE("random data is left uncompressed", "[compress]") {
  Compressor compressor(3);
  for (size_t size : {1, 100, 60000, 1 << 20}) {
    INFO(size << " random bytes");
    const Bytes data = random_bytes(size, size);
    Bytes out{1, 2, 3};
    CHECK_FALSE(compressor.compress(data, out));
    CHECK(out == Bytes{1, 2, 3});
  }
}

TEST_CASE("empty input is not compressed", "[compress]") {
  Compressor compressor(3);
  Bytes out;
  CHECK_FALSE(compressor.compress({}, out));
  CHECK(out.empty());
}

TEST_CASE("partly compressible chunks still compress", "[compress]") {
  Compressor compressor(3);
  const size_t size = 1 << 20;
  SECTION("half random, half zeros") {
    Bytes data = random_bytes(size, 3);
    std::fill(data.begin() + size / 2, data.end(), 0);
    Bytes frame;
    REQUIRE(compressor.compress(data, frame));
    CHECK(frame.size() < size * 6 / 10);
    CHECK(round_trip(frame, size) == data);
  }
  SECTION("zeros, then random") {
    Bytes data = random_bytes(size, 4);
    std::fill(data.begin(), data.begin() + size / 2, 0);
    Bytes frame;
    REQUIRE(compressor.compress(data, frame));
    CHECK(round_trip(frame, size) == data);
  }
  SECTION("random with a text quarter in the middle") {
    Bytes data = random_bytes(size, 5);
    const Bytes text = text_bytes(size / 4, 6);
    std::copy(text.begin(), text.end(), data.begin() + size / 2);
    Bytes frame;
    REQUIRE(compressor.compress(data, frame));
    CHECK(round_trip(frame, size) == data);
  }
}

TEST_CASE("data that shrinks only by entropy coding is compressed", "[compress]") {
  // Hex digits of random bytes: no repeats for zstd to match, but 4 bits of
  // information per byte.
  const std::string hex = to_hex(random_bytes(1 << 19, 8));
  const Bytes data(hex.begin(), hex.end());
  Bytes frame;
  REQUIRE(Compressor(3).compress(data, frame));
  CHECK(frame.size() < data.size() * 6 / 10);
  CHECK(round_trip(frame, data.size()) == data);
}

TEST_CASE("decompress rejects corrupt frames and wrong lengths", "[compress]") {
  Compressor compressor(3);
  const Bytes text = text_bytes(100000, 7);
  Bytes frame;
  REQUIRE(compressor.compress(text, frame));

  CHECK(decompress_failure(frame, text.size() + 1) == ErrorKind::kIntegrity);
  CHECK(decompress_failure(frame, text.size() - 1) == ErrorKind::kIntegrity);
  CHECK(decompress_failure(ByteView(frame).first(frame.size() / 2), text.size()) == ErrorKind::kIntegrity);
  CHECK(decompress_failure(text, text.size()) == ErrorKind::kIntegrity);  // not a frame at all
  CHECK(decompress_failure({}, 0) == ErrorKind::kIntegrity);

  Bytes bad_magic = frame;
  bad_magic[0] ^= 0xff;
  CHECK(decompress_failure(bad_magic, text.size()) == ErrorKind::kIntegrity);

  Bytes out(3, 1);
  CHECK_THROWS_AS(decompress(frame, text.size() + 1, out, "x"), Error);
  CHECK(out.empty());
}

TEST_CASE("compression levels by name or number", "[compress]") {
  CHECK(parse_compression("off", "--compression") == kCompressionOff);
  CHECK(parse_compression("0", "--compression") == kCompressionOff);
  CHECK(parse_compression("fast", "--compression") == kCompressionFast);
  CHECK(parse_compression("default", "--compression") == kCompressionDefault);
  CHECK(parse_compression("max", "--compression") == kCompressionMax);
  CHECK(parse_compression("-3", "--compression") == -3);
  CHECK(parse_compression("19", "--compression") == 19);
  for (const char* bad : {"", "20", "-8", "3x", "fastest", " 3"}) {
    INFO(bad);
    try {
      parse_compression(bad, "--compression");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kUsage);
      CHECK(std::string(e.what()).find("--compression") != std::string::npos);
    }
  }
  for (int level : {kCompressionOff, kCompressionFast, kCompressionDefault, kCompressionMax, -5, 6}) {
    CHECK(parse_compression(compression_name(level), "x") == level);
  }
}

TEST_CASE("every level from the fastest to the strongest round-trips text", "[compress]") {
  const Bytes text = text_bytes(1 << 20, 5);
  size_t previous = 0;
  for (int level : {kCompressionMinLevel, -1, 1, 3, kCompressionMax}) {
    INFO("level " << level);
    Bytes frame;
    REQUIRE(Compressor(level).compress(text, frame));
    CHECK(round_trip(frame, text.size()) == text);
    if (previous) CHECK(frame.size() <= previous);  // stronger levels are no larger here
    previous = frame.size();
  }
  CHECK_THROWS_AS(Compressor(0), Error);  // 0 is "off", not a zstd level
}

TEST_CASE("without the probe, every chunk is compressed in full", "[compress]") {
  // Random data whose second half repeats the first: the probe's slices see
  // only random bytes and give up; the whole chunk halves.
  const Bytes half = random_bytes(256 << 10, 11);
  Bytes data = half;
  data.insert(data.end(), half.begin(), half.end());
  Bytes probed, full;
  CHECK_FALSE(Compressor(CompressorParams{.level = 3}).compress(data, probed));
  REQUIRE(Compressor(CompressorParams{.level = 3, .probe = false}).compress(data, full));
  CHECK(full.size() < data.size() * 6 / 10);
  CHECK(round_trip(full, data.size()) == data);
  // zstd's own parameters are taken, and refused when out of range.
  Bytes small_window;
  REQUIRE(Compressor(CompressorParams{.level = 1, .window_log = 17, .hash_log = 14}).compress(text_bytes(1 << 20, 2), small_window));
  CHECK_THROWS_AS(Compressor(CompressorParams{.level = 1, .window_log = 99}), Error);
}
