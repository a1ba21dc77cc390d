#include "util/allocator.h"

#include <malloc.h>

namespace keel {

void keep_large_allocations_in_heap() {
  // 32 MiB is the most glibc accepts on 64-bit: above any buffer keel makes
  // by default (parts, read buffers and chunks are at most 16 MiB).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Return memory to the kernel only when a whole budget's worth lies free.
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace keel
