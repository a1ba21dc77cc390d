// Verifies a file that restore writes in pieces, in whatever order they
// arrive, from the bytes as they are written: a piece whose predecessors are
// all hashed is hashed from memory; one that arrives early is copied and
// held until its turn comes, or, once the restore's allowance for such
// copies is spent, read back from the file then. Holes count as zeros. The
// result is the XXH3-128 of the whole file, as the snapshot records it.
//
// Why hold them: reader threads take a large file's consecutive pack ranges
// at once, so all but the one at the front arrive early; read back from a
// file written around the page cache, that was half of a 4 GiB restore read
// again from the disk, one synchronous 1 MiB read at a time, under the
// file's lock (docs/performance.md, "Both cores busy").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "engine/tree.h"
#include "util/bytes.h"
#include "util/buffer_pool.h"
#include "util/checksum.h"

namespace keel::engine {

// Memory for the copies of early pieces, shared by the hashers of one
// restore: at most `bytes`, in blocks recycled on huge pages (a fresh 4 KiB
// page costs a page fault, 22 us on the development VM; copies into
// fresh allocations tripled the verify stage's CPU).
class EarlyPieceMemory {
 public:
  static constexpr size_t kBlock = 2 << 20;
  explicit EarlyPieceMemory(uint64_t bytes) : blocks_(kBlock, static_cast<size_t>(bytes / kBlock)) {}
  // A block, or null if all are held.
  std::shared_ptr<uint8_t[]> block() { return blocks_.try_get(); }

 private:
  BufferPool blocks_;
};

class PieceHasher {
 public:
  // `layout`: the file's content in order; `memory`: for copies of early
  // pieces (null: every early piece is read back). Both must outlive the hasher.
  explicit PieceHasher(std::span<const ContentRef> layout, EarlyPieceMemory* memory = nullptr)
      : layout_(layout), memory_(memory) {}

  // Reads `out.size()` bytes of the file at `offset` into `out`; returns
  // how many it got (fewer only at the file's end). May throw.
  using ReadBack = std::function<size_t(std::span<uint8_t> out, uint64_t offset)>;

  // `data` was just written at `offset`; pieces that arrived before their
  // turn and were not held are read back through `read_back`. Thread-safe.
  // Throws what `read_back` throws.
  void written(const ReadBack& read_back, uint64_t offset, ByteView data);

  // After the last piece: the whole file's hash, or nothing if a piece was
  // never written (the caller then hashes the file on disk).
  std::optional<Hash128> finish();

 private:
  // Hashes every piece (and hole) that is next in line and available: the
  // one just written at `offset` from memory, earlier arrivals through
  // `read_back`. Returns whether the one just written was hashed.
  bool advance(const ReadBack* read_back, uint64_t offset, ByteView current);

  // A copy of an early piece, in one or more blocks of memory_.
  struct Segment {
    std::shared_ptr<uint8_t[]> block;  // holds it while the segment lives
    ByteView bytes;
  };
  using Copy = std::vector<Segment>;
  // Copies `data` into `copy`, after what the current block holds; leaves
  // `copy` empty (to be read back) once memory_ has no block left.
  void hold(ByteView data, Copy& copy);

  std::mutex mu_;
  std::span<const ContentRef> layout_;
  EarlyPieceMemory* memory_;
  size_t next_ = 0;         // layout_[next_] is the first part not yet hashed
  uint64_t hashed_to_ = 0;  // its file offset
  // Pieces written but not yet hashed, by offset: a copy, or empty to be read back.
  std::map<uint64_t, Copy> early_;
  std::shared_ptr<uint8_t[]> block_;  // where the next copy goes, from block_used_ on
  size_t block_used_ = EarlyPieceMemory::kBlock;
  Xxh3Stream hash_;
};

}  // namespace keel::engine
