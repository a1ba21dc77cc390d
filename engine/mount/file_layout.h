// Where each byte of a snapshot file comes from: the file's chunk list with
// the offset at which each chunk starts, so a read at any offset finds its
// first chunk by binary search instead of summing lengths from the start.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/tree.h"

namespace keel::engine::mount {

// The part of one chunk (or hole) that a read covers.
struct Piece {
  size_t index = 0;        // into FileLayout::refs()
  uint64_t offset = 0;     // within the chunk
  uint64_t length = 0;
  uint64_t out_offset = 0;  // within the read's buffer
};

class FileLayout {
 public:
  explicit FileLayout(std::vector<ContentRef> refs);

  uint64_t size() const { return starts_.back(); }
  const std::vector<ContentRef>& refs() const { return refs_; }
  uint64_t start(size_t index) const { return starts_[index]; }
  // Bytes that are stored (not holes): what the file occupies.
  uint64_t stored_bytes() const { return stored_; }

  // The chunk holding byte `offset`; nullopt at or past the end.
  std::optional<size_t> chunk_at(uint64_t offset) const;
  // The pieces of [offset, offset + length), clipped at the end of the file.
  std::vector<Piece> pieces(uint64_t offset, uint64_t length) const;
  // lseek(SEEK_DATA / SEEK_HOLE): the first byte at or after `offset` that
  // is data (nullopt: none) or in a hole (the end of the file counts as one).
  std::optional<uint64_t> next_data(uint64_t offset) const;
  uint64_t next_hole(uint64_t offset) const;

 private:
  std::vector<ContentRef> refs_;
  std::vector<uint64_t> starts_;  // starts_[i]: where refs_[i] begins; one more: the size
  uint64_t stored_ = 0;
};

}  // namespace keel::engine::mount
