// XXH3-128 streaming updates and XXH3-64 one-shot hashes on AVX2. Debian's libxxhash is built for SSE2,
// the x86-64 baseline; xxHash's own AVX2 kernel, compiled here from the
// same header, takes about half the CPU per byte on the development machine
// (38 against 21 GB/s in cache). XXH3's result does not depend on the
// kernel, so either path gives the same digests. Used by Xxh3Stream and
// xxh3_64 (checksum.cc) where the CPU has AVX2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keel::xxh3_avx2 {

// Whether this CPU and the kernel run AVX2 code.
bool available();

// XXH3_128bits_update on `state`, the library's XXH3_state_t (the kernel
// is compiled from the header that library was built from, so the state's
// layout is the same). Call only where available().
void update128(void* state, const void* data, size_t size);

// XXH3_64bits of `data`. Call only where available().
uint64_t hash64(const void* data, size_t size);

}  // namespace keel::xxh3_avx2
