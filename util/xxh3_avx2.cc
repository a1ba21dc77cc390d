#include "util/xxh3_avx2.h"

#if defined(__x86_64__)
// Everything below, xxHash's inline functions included, may use AVX2: it
// runs only where available() said so.
#pragma GCC target("avx2")
#include <immintrin.h>  // xxhash.h includes it only where the compiler's flags enable AVX2
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#endif
#include <xxhash.h>

namespace keel::xxh3_avx2 {

bool available() {
#if defined(__x86_64__)
  __builtin_cpu_init();  // may run before libgcc's own constructor did
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

void update128(void* state, const void* data, size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state), data, size);
}

uint64_t hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace keel::xxh3_avx2
