#include "engine/piece_hasher.h"

#include <algorithm>
#include <cstring>

namespace keel::engine {

void PieceHasher::written(const ReadBack& read_back, uint64_t offset, ByteView data) {
  std::lock_guard lock(mu_);
  if (advance(&read_back, offset, data)) return;
  Copy& copy = early_[offset];
  if (memory_) hold(data, copy);
}

void PieceHasher::hold(ByteView data, Copy& copy) {
  while (!data.empty()) {
    if (block_used_ == EarlyPieceMemory::kBlock) {
      block_ = memory_->block();
      block_used_ = 0;
      if (!block_) {
        block_used_ = EarlyPieceMemory::kBlock;
        copy.clear();
        return;
      }
    }
    size_t n = std::min(data.size(), EarlyPieceMemory::kBlock - block_used_);
    uint8_t* at = block_.get() + block_used_;
    std::memcpy(at, data.data(), n);
    copy.push_back({block_, ByteView(at, n)});
    block_used_ += n;
    data = data.subspan(n);
  }
}

std::optional<Hash128> PieceHasher::finish() {
  std::lock_guard lock(mu_);
  advance(nullptr, UINT64_MAX, {});  // trailing (or only) holes; no offset is UINT64_MAX
  if (next_ != layout_.size() || !early_.empty()) return std::nullopt;
  return hash_.digest();
}

bool PieceHasher::advance(const ReadBack* read_back, uint64_t offset, ByteView current) {
  // Read back in slices: a piece may be as large as a chunk (8 MiB), and
  // every reader thread keeps this buffer. 1 MiB, an average chunk: a read
  // back around the page cache (targets/local/direct_file.h) is an I/O
  // request each, and 256 KiB slices made four per chunk.
  constexpr size_t kSlice = 1 << 20;
  thread_local Bytes slice(kSlice);
  bool consumed = false;
  for (; next_ < layout_.size(); hashed_to_ += layout_[next_].length, ++next_) {
    const ContentRef& part = layout_[next_];
    if (part.hole) {
      hash_.update_zeros(part.length);
    } else if (!consumed && offset == hashed_to_) {
      hash_.update(current);
      consumed = true;
    } else if (auto early = early_.find(hashed_to_); early != early_.end() && !early->second.empty()) {
      for (const Segment& s : early->second) hash_.update(s.bytes);
      early_.erase(early);
    } else if (read_back && early != early_.end()) {
      for (uint64_t done = 0; done < part.length;) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(kSlice, part.length - done));
        size_t n = (*read_back)(std::span<uint8_t>(slice.data(), want), hashed_to_ + done);
        if (n == 0) break;  // shorter than it should be: the digest will not match
        hash_.update(ByteView(slice.data(), n));
        done += n;
      }
      early_.erase(early);
    } else {
      break;
    }
  }
  return consumed;
}

}  // namespace keel::engine
