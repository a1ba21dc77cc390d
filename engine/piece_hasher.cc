#include "engine/piece_hasher.h"

#include "util/error.h"
#include "util/fd.h"

namespace keel::engine {

void PieceHasher::written(int fd, uint64_t offset, ByteView data, const std::string& path) {
  std::lock_guard lock(mu_);
  bool consumed = false;
  advance(fd, offset, data, consumed, path);
  if (!consumed) early_.insert(offset);
}

std::optional<Hash128> PieceHasher::finish() {
  std::lock_guard lock(mu_);
  bool consumed = false;
  advance(-1, UINT64_MAX, {}, consumed, "");  // trailing (or only) holes
  if (next_ != layout_.size() || !early_.empty()) return std::nullopt;
  return hash_.digest();
}

void PieceHasher::advance(int fd, uint64_t offset, ByteView current, bool& consumed, const std::string& path) {
  thread_local Bytes read_back;
  for (; next_ < layout_.size(); hashed_to_ += layout_[next_].length, ++next_) {
    const ContentRef& part = layout_[next_];
    if (part.hole) {
      hash_.update_zeros(part.length);
    } else if (!consumed && offset == hashed_to_) {
      hash_.update(current);
      consumed = true;
    } else if (auto early = early_.find(hashed_to_); early != early_.end()) {
      read_back.resize(part.length);
      size_t n = pread_full(fd, read_back, static_cast<off_t>(hashed_to_), "read back " + path);
      hash_.update(ByteView(read_back.data(), n));
      early_.erase(early);
    } else {
      return;
    }
  }
}

}  // namespace keel::engine
