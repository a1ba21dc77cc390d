#include "engine/mount/file_layout.h"

#include <algorithm>

namespace keel::engine::mount {

FileLayout::FileLayout(std::vector<ContentRef> refs) : refs_(std::move(refs)) {
  starts_.reserve(refs_.size() + 1);
  uint64_t at = 0;
  for (const ContentRef& ref : refs_) {
    starts_.push_back(at);
    at += ref.length;
    if (!ref.hole) stored_ += ref.length;
  }
  starts_.push_back(at);
}

std::optional<size_t> FileLayout::chunk_at(uint64_t offset) const {
  if (offset >= size()) return std::nullopt;
  // The last start at or before `offset`; empty chunks share a start with
  // their successor and are skipped by taking the last one.
  auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, offset);
  return static_cast<size_t>(it - starts_.begin()) - 1;
}

std::vector<Piece> FileLayout::pieces(uint64_t offset, uint64_t length) const {
  std::vector<Piece> out;
  std::optional<size_t> first = chunk_at(offset);
  if (!first) return out;
  uint64_t end = std::min(size(), offset + std::min(length, size() - offset));
  for (size_t i = *first; i < refs_.size() && starts_[i] < end; ++i) {
    if (refs_[i].length == 0) continue;
    uint64_t from = std::max(offset, starts_[i]);
    uint64_t to = std::min(end, starts_[i + 1]);
    out.push_back(Piece{i, from - starts_[i], to - from, from - offset});
  }
  return out;
}

std::optional<uint64_t> FileLayout::next_data(uint64_t offset) const {
  std::optional<size_t> i = chunk_at(offset);
  if (!i) return std::nullopt;
  for (size_t j = *i; j < refs_.size(); ++j) {
    if (!refs_[j].hole && refs_[j].length > 0) return std::max(offset, starts_[j]);
  }
  return std::nullopt;
}

uint64_t FileLayout::next_hole(uint64_t offset) const {
  std::optional<size_t> i = chunk_at(offset);
  if (!i) return size();
  for (size_t j = *i; j < refs_.size(); ++j) {
    if (refs_[j].hole && refs_[j].length > 0) return std::max(offset, starts_[j]);
  }
  return size();
}

}  // namespace keel::engine::mount
