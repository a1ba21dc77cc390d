#include "util/allocator.h"

#include <malloc.h>
#include <openssl/crypto.h>

#include <cstdlib>

#include "util/huge_pages.h"

namespace keel {
namespace {

// glibc's largest mmap threshold (M_MMAP_THRESHOLD's bound on 64-bit).
constexpr size_t kMaxMmapThreshold = size_t{32} << 20;
// glibc's default M_MMAP_MAX.
constexpr int kDefaultMmapMax = 65536;

void* openssl_malloc(size_t n, const char*, int) {
  void* p = malloc_in_heap(n);
  if (p && n >= 2 * kHugePageSize) advise_huge_pages(p, n);
  return p;
}

void* openssl_realloc(void* p, size_t n, const char*, int) { return std::realloc(p, n); }

void openssl_free(void* p, const char*, int) { std::free(p); }

}  // namespace

void* malloc_in_heap(size_t n) {
  // scrypt's 32 MiB (and a little more) lie above any mmap threshold: glibc
  // mapped them anew and unmapped them once the key slot was opened, and a
  // backup's first read buffers then faulted in as much fresh memory again.
  // In the heap they are kept for those buffers: fresh memory is dear on a
  // paravirtual VM (3-6 ms of CPU per MiB to fault in, against 0.1 for
  // memory this process freed; docs/performance.md). With no mmap allowed,
  // glibc grows the heap instead.
  if (n < kMaxMmapThreshold) return std::malloc(n);
  mallopt(M_MMAP_MAX, 0);
  void* p = std::malloc(n);
  mallopt(M_MMAP_MAX, kDefaultMmapMax);
  return p;
}

void keep_large_allocations_in_heap() {
  // 32 MiB is the most glibc accepts on 64-bit: above any buffer keel makes
  // by default (parts, read buffers and chunks are at most 16 MiB).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Return memory to the kernel only when a whole budget's worth lies free.
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // Refused (returns 0) once OpenSSL has allocated: then it keeps malloc.
  CRYPTO_set_mem_functions(openssl_malloc, openssl_realloc, openssl_free);
}

}  // namespace keel
