// Process-wide memory allocator settings, applied once at start-up.
#pragma once

#include <cstddef>

namespace keel {

// Keeps the multi-MiB buffers the data path allocates and frees (read
// buffers, chunks, sealed blobs, part bodies) in the allocator's heaps
// instead of a fresh mmap each. glibc maps every allocation above its
// dynamic threshold anew and returns freed heap tops to the kernel, so the
// same memory was faulted in, zeroed and released again page by page: a
// tenth of a restore's CPU. Memory in use stays bounded by the engine's
// budgets; what is freed is kept for reuse.
//
// Also puts OpenSSL's large allocations on huge pages (util/huge_pages.h):
// the key slot's scrypt touches 32 MiB once per command, 8,000 page faults
// (about 0.2 CPU-s on the development VM) in 4 KiB pages. Call before
// anything else uses OpenSSL.
void keep_large_allocations_in_heap();

// malloc(n), from the heap even above the largest mmap threshold glibc
// takes (32 MiB), so that the memory is kept for reuse once freed (what
// OpenSSL's scrypt allocates goes there; see allocator.cc).
void* malloc_in_heap(size_t n);

}  // namespace keel
