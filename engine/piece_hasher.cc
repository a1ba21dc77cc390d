#include "engine/piece_hasher.h"

#include <algorithm>

#include "util/error.h"
#include "util/fd.h"

namespace keel::engine {

void PieceHasher::written(int fd, uint64_t offset, ByteView data, const std::string& path) {
  std::lock_guard lock(mu_);
  if (!advance(fd, offset, data, path)) early_.insert(offset);
}

std::optional<Hash128> PieceHasher::finish() {
  std::lock_guard lock(mu_);
  advance(-1, UINT64_MAX, {}, "");  // trailing (or only) holes; no offset is UINT64_MAX
  if (next_ != layout_.size() || !early_.empty()) return std::nullopt;
  return hash_.digest();
}

bool PieceHasher::advance(int fd, uint64_t offset, ByteView current, const std::string& path) {
  // Read back in slices: a piece may be as large as a chunk (8 MiB), and
  // every reader thread keeps this buffer.
  constexpr size_t kSlice = 256 << 10;
  thread_local Bytes read_back(kSlice);
  bool consumed = false;
  for (; next_ < layout_.size(); hashed_to_ += layout_[next_].length, ++next_) {
    const ContentRef& part = layout_[next_];
    if (part.hole) {
      hash_.update_zeros(part.length);
    } else if (!consumed && offset == hashed_to_) {
      hash_.update(current);
      consumed = true;
    } else if (auto early = early_.find(hashed_to_); early != early_.end()) {
      for (uint64_t done = 0; done < part.length;) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(kSlice, part.length - done));
        size_t n = pread_full(fd, std::span<uint8_t>(read_back.data(), want), static_cast<off_t>(hashed_to_ + done),
                              "read back " + path);
        if (n == 0) break;  // shorter than it should be: the digest will not match
        hash_.update(ByteView(read_back.data(), n));
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
