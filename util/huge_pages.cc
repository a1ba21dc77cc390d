#include "util/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace keel {
namespace {

constexpr size_t kPageSize = 4096;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void advise_huge_pages(void* p, size_t n) {
  auto begin = reinterpret_cast<uintptr_t>(p);
  uintptr_t first = round_up(begin, kHugePageSize);
  uintptr_t last = (begin + n) / kHugePageSize * kHugePageSize;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

AlignedBuffer allocate_aligned(size_t n) {
  const size_t align = n >= kHugePageSize ? kHugePageSize : kPageSize;
  const size_t size = round_up(std::max<size_t>(n, 1), align);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(align, size));
  if (!p) throw std::bad_alloc();
  if (align == kHugePageSize) advise_huge_pages(p, size);
  return AlignedBuffer(p);
}

void reserve_huge(Bytes& b, size_t n) {
  if (b.capacity() >= n) return;
  if (n < kHugePageSize) {
    b.reserve(n);
    return;
  }
  b.reserve(round_up(n, kHugePageSize));
  advise_huge_pages(b.data(), b.capacity());
}

std::span<uint8_t> overwritable(Bytes& b, size_t n) {
  if (b.size() < n) {
    if (b.capacity() < n) {
      b.clear();  // nothing to keep: the reallocation copies nothing
      // At least doubled: grown to each new largest content's size exactly, a buffer
      // was reallocated, zero-filled and faulted in again at every new record.
      reserve_huge(b, std::max(n, 2 * b.capacity()));
    }
    b.resize(b.capacity());
  }
  return {b.data(), n};
}

}  // namespace keel
