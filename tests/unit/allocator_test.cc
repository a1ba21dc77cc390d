#include "util/allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include <catch2/catch.hpp>

namespace {

size_t mapped_blocks() { return mallinfo2().hblks; }

}  // namespace

TEST_CASE("malloc_in_heap takes large blocks from the heap, not a mapping of their own", "[allocator]") {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator replaces glibc's: mallopt and mallinfo2 do not reach it.
  WARN("built with AddressSanitizer: glibc's heap is not in use; skipped");
  return;
#endif
  const size_t size = (40u << 20) + 3000;  // above any mmap threshold, as scrypt's 32 MiB and more
  // The control: plain malloc maps a block this large by itself.
  const size_t before_plain = mapped_blocks();
  void* plain = std::malloc(size);
  REQUIRE(plain);
  CHECK(mapped_blocks() == before_plain + 1);
  std::free(plain);

  const size_t before = mapped_blocks();
  auto* p = static_cast<char*>(keel::malloc_in_heap(size));
  REQUIRE(p);
  CHECK(mapped_blocks() == before);
  std::memset(p, 7, size);
  CHECK(p[size - 1] == 7);
  std::free(p);
  // Small blocks are plain malloc's.
  void* small = keel::malloc_in_heap(100);
  REQUIRE(small);
  std::free(small);
  // mmap is allowed again afterwards.
  plain = std::malloc(size);
  REQUIRE(plain);
  CHECK(mapped_blocks() == before + 1);
  std::free(plain);
}
