// Large data-path buffers on transparent huge pages. A first touch of a
// 4 KiB page is a page fault: 22 us each on the development VM (paravirtual
// paging), where the multi-MiB buffers of a backup or restore cost more in
// faults than their contents cost to hash. A 2 MiB huge page is one fault,
// and the kernel's copies into it (pread) need fewer TLB misses. Where the
// system offers no huge pages (THP "never"), these are plain allocations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "util/bytes.h"

namespace keel {

inline constexpr size_t kHugePageSize = size_t{2} << 20;

// Asks for huge pages over the whole 2 MiB pages inside [p, p + n): a hint,
// effective for pages not yet touched; failures are ignored.
void advise_huge_pages(void* p, size_t n);

struct FreeDeleter {
  void operator()(uint8_t* p) const;
};
using AlignedBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;

// `n` bytes (contents undefined), 4 KiB-aligned (usable for O_DIRECT); from
// 2 MiB up, 2 MiB-aligned and advised as huge pages. Throws std::bad_alloc.
AlignedBuffer allocate_aligned(size_t n);

// Makes `b` hold at least `n` bytes without reallocating; a growth to 2 MiB
// or more is rounded up to whole huge pages and advised as such.
void reserve_huge(Bytes& b, size_t n);

// The first `n` bytes of `b`, for the caller to overwrite: a buffer reused
// for contents of varying sizes (decryption, decompression). `b` only grows, at
// least doubling, as reserve_huge, and each of its bytes is zero-filled once: resizing it to
// each content's size zero-filled the difference every time it grew again
// (memset, 3% of a restore's CPU) and copied what it held on reallocation.
std::span<uint8_t> overwritable(Bytes& b, size_t n);

}  // namespace keel
