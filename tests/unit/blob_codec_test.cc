#include <catch2/catch.hpp>

#include <string>

#include "engine/blob_codec.h"
#include "tests/unit/test_support.h"

using namespace keel;
using namespace keel::engine;

TEST_CASE("blobs sealed one after another by one compressor open to their content", "[blob_codec]") {
  const Key256 key = random_key();
  Compressor compressor(1);
  Bytes big_text;
  for (int i = 0; big_text.size() < (1 << 20); ++i) {
    const std::string line = "line " + std::to_string(i % 977) + " of a compressible chunk\n";
    big_text.insert(big_text.end(), line.begin(), line.end());
  }
  const Bytes small_text(big_text.begin(), big_text.begin() + 5000);
  // The compressor's frame buffer and the sealed output keep their size
  // from one blob to the next: a smaller or raw blob after a larger one must
  // not pick up its bytes.
  const Bytes inputs[] = {big_text, small_text, test::random_bytes(1 << 20, 8), test::random_bytes(300, 9),
                          Bytes{42}, Bytes{}, small_text};
  Bytes sealed, raw, open_scratch;
  for (const Bytes& input : inputs) {
    INFO(input.size() << " bytes");
    const Id id = Id::random();
    seal_blob(key, &compressor, id, input, sealed);
    const bool compressible = &input != &inputs[2] && &input != &inputs[3] && input.size() > 1;
    if (compressible) CHECK(sealed.size() < input.size());
    if (!compressible) CHECK(sealed.size() == 1 + input.size() + kSealOverhead);
    const ByteView opened =
        open_blob(key, id, sealed, static_cast<uint32_t>(input.size()), raw, open_scratch, "test blob");
    CHECK(Bytes(opened.begin(), opened.end()) == input);
  }
}
