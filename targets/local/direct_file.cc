#include "targets/local/direct_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "util/error.h"

namespace keel::targets::local {
namespace {

constexpr uint64_t kBlock = DirectFile::kBlock;
// Unaligned data is copied into an aligned buffer this large at a time: a
// copy within the CPU's caches, far cheaper than the page cache's.
constexpr size_t kBounceSize = size_t{1} << 20;

uint64_t align_down(uint64_t n) { return n / kBlock * kBlock; }
uint64_t align_up(uint64_t n) { return align_down(n + kBlock - 1); }

uint8_t* aligned_alloc_or_throw(size_t size) {
  void* p = std::aligned_alloc(kBlock, size);
  if (!p) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kBlock == 0; }

}  // namespace

void DirectFile::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

// Created buffered, then switched to O_DIRECT: open(O_CREAT | O_DIRECT)
// creates the file even where it then refuses O_DIRECT with EINVAL, and a
// second O_EXCL open would find it there.
DirectFile::DirectFile(const std::string& path, bool direct)
    : DirectFile(open_or_throw(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), path, direct) {}

DirectFile::DirectFile(UniqueFd fd, const std::string& path, bool direct) : path_(path), fd_(std::move(fd)) {
  if (!direct) return;
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  direct_ = flags >= 0 && ::fcntl(fd_.get(), F_SETFL, flags | O_DIRECT) == 0;
}

DirectFile::~DirectFile() = default;

bool DirectFile::direct() const {
  std::lock_guard lock(mu_);
  return direct_;
}

void DirectFile::write(ByteView data, uint64_t offset) {
  if (!direct()) {
    pwrite_all(fd_.get(), data, static_cast<off_t>(offset), "write " + path_);
    return;
  }
  const uint64_t end = offset + data.size();
  // The head, up to the first block boundary, and the tail after the last
  // one belong to blocks that neighbouring writes share.
  const size_t head = std::min<uint64_t>(data.size(), (kBlock - offset % kBlock) % kBlock);
  if (head) stash(data.first(head), offset);
  const uint64_t body_begin = offset + head;
  const uint64_t body_end = std::max(body_begin, align_down(end));
  if (body_end > body_begin) write_aligned(data.subspan(head, body_end - body_begin), body_begin);
  if (end > body_end) stash(data.subspan(body_end - offset), body_end);
}

void DirectFile::stash(ByteView piece, uint64_t offset) {
  const uint64_t block_offset = align_down(offset);
  const uint8_t* complete = nullptr;
  {
    std::lock_guard lock(mu_);
    Partial& partial = partial_[block_offset];
    if (!partial.block) {
      partial.block = AlignedBlock(aligned_alloc_or_throw(kBlock));
      std::memset(partial.block.get(), 0, kBlock);
    }
    const size_t at = offset - block_offset;
    std::memcpy(partial.block.get() + at, piece.data(), piece.size());
    partial.filled += piece.size();
    partial.end = std::max(partial.end, at + piece.size());
    // Only the write that completes a block writes it: the block is not
    // touched again until then.
    if (partial.filled == kBlock && direct_) complete = partial.block.get();
  }
  if (!complete) return;
  write_aligned(ByteView(complete, kBlock), block_offset);
  std::lock_guard lock(mu_);
  partial_.erase(block_offset);
}

void DirectFile::read(std::span<uint8_t> out, uint64_t offset) {
  // Under the lock throughout: a completed block leaves partial_ only after
  // its write landed (stash), so a block the file read missed is still there.
  std::lock_guard lock(mu_);
  read_blocks(out, offset);
  read_partial_blocks(out, offset);
}

// From the file, in whole aligned blocks while it is O_DIRECT (a file
// written directly is read directly: nothing of it is in the page cache to
// read, and caching what is read back would cost the copies saved).
void DirectFile::read_blocks(std::span<uint8_t> out, uint64_t offset) {
  if (!direct_) {
    if (pread_full(fd_.get(), out, static_cast<off_t>(offset), "read back " + path_) != out.size()) {
      throw Error(ErrorKind::kTargetIo, "read back " + path_ + ": shorter than what was written");
    }
    return;
  }
  thread_local AlignedBlock bounce;
  if (!bounce) bounce = AlignedBlock(aligned_alloc_or_throw(kBounceSize));
  const uint64_t end = offset + out.size();
  for (uint64_t pos = align_down(offset); pos < end;) {
    const size_t want = std::min<uint64_t>(kBounceSize, align_up(end) - pos);
    const ssize_t n = ::pread(fd_.get(), bounce.get(), want, static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("read back " + path_, errno);
    if (n == 0) throw Error(ErrorKind::kTargetIo, "read back " + path_ + ": shorter than what was written");
    const uint64_t from = std::max(pos, offset), to = std::min<uint64_t>(pos + static_cast<uint64_t>(n), end);
    if (to > from) std::memcpy(out.data() + (from - offset), bounce.get() + (from - pos), to - from);
    pos += static_cast<uint64_t>(n);
  }
}

// Over what the file had: the bytes still waiting in partial blocks.
void DirectFile::read_partial_blocks(std::span<uint8_t> out, uint64_t offset) {
  const uint64_t end = offset + out.size();
  for (auto it = partial_.lower_bound(align_down(offset)); it != partial_.end() && it->first < end; ++it) {
    const uint64_t from = std::max(it->first, offset), to = std::min(it->first + it->second.end, end);
    if (to > from) std::memcpy(out.data() + (from - offset), it->second.block.get() + (from - it->first), to - from);
  }
}

void DirectFile::write_aligned(ByteView data, uint64_t offset) {
  thread_local AlignedBlock bounce;
  size_t done = 0;
  while (done < data.size()) {
    ByteView slice = data.subspan(done);
    if (!aligned(slice.data())) {
      if (!bounce) bounce = AlignedBlock(aligned_alloc_or_throw(kBounceSize));
      slice = slice.first(std::min(slice.size(), kBounceSize));
      std::memcpy(bounce.get(), slice.data(), slice.size());
      slice = ByteView(bounce.get(), slice.size());
    }
    const ssize_t n = ::pwrite(fd_.get(), slice.data(), slice.size(), static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL) {
      // The file system took the open but not this write (alignment it
      // wants larger than ours): the rest goes through the page cache.
      fall_back_to_buffered();
      pwrite_all(fd_.get(), data.subspan(done), static_cast<off_t>(offset + done), "write " + path_);
      return;
    }
    if (n < 0) throw_errno("write " + path_, errno);
    if (n == 0) throw Error(ErrorKind::kTargetIo, "write " + path_ + ": no progress");
    // A short direct write ends on a block boundary; go on from there.
    done += static_cast<size_t>(n);
  }
}

void DirectFile::fall_back_to_buffered() {
  std::lock_guard lock(mu_);
  if (!direct_) return;
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags & ~O_DIRECT) != 0) throw_errno("fcntl " + path_, errno);
  direct_ = false;
}

void DirectFile::finish() {
  fall_back_to_buffered();  // the partial blocks are not whole blocks
  std::map<uint64_t, Partial> partial;
  {
    std::lock_guard lock(mu_);
    partial.swap(partial_);
  }
  for (const auto& [block_offset, p] : partial) {
    pwrite_all(fd_.get(), ByteView(p.block.get(), p.end), static_cast<off_t>(block_offset), "write " + path_);
  }
}

}  // namespace keel::targets::local
