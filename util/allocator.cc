#include "util/allocator.h"

#include <malloc.h>
#include <openssl/crypto.h>

#include <cstdlib>

#include "util/huge_pages.h"

namespace keel {
namespace {

void* openssl_malloc(size_t n, const char*, int) {
  void* p = std::malloc(n);
  if (p && n >= 2 * kHugePageSize) advise_huge_pages(p, n);
  return p;
}

void* openssl_realloc(void* p, size_t n, const char*, int) { return std::realloc(p, n); }

void openssl_free(void* p, const char*, int) { std::free(p); }

}  // namespace

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
