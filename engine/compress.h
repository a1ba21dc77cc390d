// zstd compression of chunks, with a cheap check that skips data that will
// not shrink (already compressed or encrypted content): compression is the
// costliest stage of a backup, and most of it is wasted on such data.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "util/bytes.h"

namespace keel::engine {

// Repository compression levels: zstd's, where negative ones are its fast
// levels; 0 stores everything raw. The named ones (docs/performance.md has
// the measurements behind them):
inline constexpr int kCompressionOff = 0;
inline constexpr int kCompressionFast = -1;
inline constexpr int kCompressionDefault = 1;
inline constexpr int kCompressionMax = 9;
inline constexpr int kCompressionMinLevel = -7;  // below this hardly anything shrinks
inline constexpr int kCompressionMaxLevel = 19;

// "off", "fast", "default", "max" or a level from kCompressionMinLevel to
// kCompressionMaxLevel. Throws Error(kUsage) naming `option`.
int parse_compression(std::string_view text, std::string_view option);
// The name of a level: "fast", "default", "max", "off", or the number.
std::string compression_name(int level);

struct CompressorParams {
  int level = kCompressionDefault;  // a zstd level, not 0
  // Sample the chunk before compressing it, and store it raw when the sample
  // does not shrink (see compress.cc).
  bool probe = true;
  // zstd's window, hash and chain logs; 0 leaves zstd's choice for the level
  // and chunk size.
  int window_log = 0;
  int hash_log = 0;
  int chain_log = 0;
};

// Not thread-safe: one per worker thread (it keeps a zstd context).
class Compressor {
 public:
  explicit Compressor(const CompressorParams& params);
  explicit Compressor(int level) : Compressor(CompressorParams{.level = level}) {}
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // Appends the compressed form of `data` to `out` and returns true if it is
  // smaller than `data`; otherwise leaves `out` as it was and returns false.
  bool compress(ByteView data, Bytes& out);
  // The compressed form of `data` where it is smaller, else nullopt: a view
  // of this compressor's own buffer, valid until its next call. Sealing
  // reads the frame from there (blob_codec.cc); copying it out first was
  // about 0.8% of a first backup's CPU.
  std::optional<ByteView> compress(ByteView data);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Decompresses into `out` (resized to raw_length). Throws Error(kIntegrity)
// naming `what` unless the frame decodes to exactly raw_length bytes.
void decompress(ByteView frame, size_t raw_length, Bytes& out, const std::string& what);

}  // namespace keel::engine
