// zstd compression of chunks, with a cheap check that skips data that will
// not shrink (already compressed or encrypted content): compression is the
// costliest stage of a backup, and most of it is wasted on such data.
#pragma once

#include <memory>

#include "util/bytes.h"

namespace keel::engine {

// Not thread-safe: one per worker thread (it keeps a zstd context).
class Compressor {
 public:
  explicit Compressor(int level);
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // Appends the compressed form of `data` to `out` and returns true if it is
  // smaller than `data`; otherwise leaves `out` as it was and returns false.
  bool compress(ByteView data, Bytes& out);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Decompresses into `out` (resized to raw_length). Throws Error(kIntegrity)
// naming `what` unless the frame decodes to exactly raw_length bytes.
void decompress(ByteView frame, size_t raw_length, Bytes& out, const std::string& what);

}  // namespace keel::engine
