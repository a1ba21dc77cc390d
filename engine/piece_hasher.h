// Verifies a file that restore writes in pieces, in whatever order they
// arrive, from the bytes as they are written: a piece whose predecessors are
// all hashed is hashed from memory; one that arrives early is read back from
// the file when its turn comes. Holes count as zeros. The result is the
// XXH3-128 of the whole file, as the snapshot records it, without reading
// back what arrived in order (most of a restore).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <span>

#include "engine/tree.h"
#include "util/bytes.h"
#include "util/checksum.h"

namespace keel::engine {

class PieceHasher {
 public:
  // `layout`: the file's content in order (it must outlive the hasher).
  explicit PieceHasher(std::span<const ContentRef> layout) : layout_(layout) {}

  // Reads `out.size()` bytes of the file at `offset` into `out`; returns
  // how many it got (fewer only at the file's end). May throw.
  using ReadBack = std::function<size_t(std::span<uint8_t> out, uint64_t offset)>;

  // `data` was just written at `offset`; pieces that arrived before their
  // turn are read back through `read_back`. Thread-safe. Throws what
  // `read_back` throws.
  void written(const ReadBack& read_back, uint64_t offset, ByteView data);

  // After the last piece: the whole file's hash, or nothing if a piece was
  // never written (the caller then hashes the file on disk).
  std::optional<Hash128> finish();

 private:
  // Hashes every piece (and hole) that is next in line and available: the
  // one just written at `offset` from memory, earlier arrivals through
  // `read_back`. Returns whether the one just written was hashed.
  bool advance(const ReadBack* read_back, uint64_t offset, ByteView current);

  std::mutex mu_;
  std::span<const ContentRef> layout_;
  size_t next_ = 0;         // layout_[next_] is the first part not yet hashed
  uint64_t hashed_to_ = 0;  // its file offset
  std::set<uint64_t> early_;  // offsets of pieces written but not yet hashed
  Xxh3Stream hash_;
};

}  // namespace keel::engine
