// FastCDC content-defined chunking with normalized chunking (level 2) and
// the "roll two bytes per step" optimisation. The gear table is derived from
// a repository secret, so boundaries do not reveal content to outsiders.
// Boundaries depend only on the bytes since the previous cut, so an insertion
// or deletion changes at most the chunks around it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "util/bytes.h"

namespace keel::engine {

struct ChunkerParams {
  uint32_t min_size = 512 * 1024;
  uint32_t avg_size = 1024 * 1024;  // a power of two
  uint32_t max_size = 8 * 1024 * 1024;

  // Throws Error(kUsage) unless 64 <= min < avg < max, avg a power of two.
  void validate() const;
};

class Chunker {
 public:
  // `secret` seeds the gear table (any length; 32 bytes in practice).
  Chunker(const ChunkerParams& params, ByteView secret);

  // Returns the length of the next chunk at the start of `data`. If `data`
  // holds fewer than max_size bytes and no cut point was found, returns
  // data.size() when `final` is set (end of stream), and 0 otherwise (the
  // caller should supply more bytes). Each call scans from the start of
  // `data`, so streaming callers should hold at least max_size bytes when
  // the stream has them. Thread-safe (const, no shared state).
  size_t next_cut(ByteView data, bool final) const;

  const ChunkerParams& params() const { return params_; }

 private:
  ChunkerParams params_;
  uint64_t mask_small_;  // more bits: harder to cut before avg
  uint64_t mask_large_;  // fewer bits: easier to cut after avg
  std::array<uint64_t, 256> gear_;
  std::array<uint64_t, 256> gear_shifted_;  // gear_ << 1, for two-byte steps
};

}  // namespace keel::engine
