#include "util/huge_pages.h"

#include <cstring>

#include <catch2/catch.hpp>

using keel::kHugePageSize;

TEST_CASE("aligned buffers suit O_DIRECT, large ones huge pages", "[huge_pages]") {
  auto small = keel::allocate_aligned(10000);
  CHECK(reinterpret_cast<uintptr_t>(small.get()) % 4096 == 0);
  std::memset(small.get(), 1, 10000);
  auto large = keel::allocate_aligned(3 * kHugePageSize + 5);
  CHECK(reinterpret_cast<uintptr_t>(large.get()) % kHugePageSize == 0);
  std::memset(large.get(), 2, 3 * kHugePageSize + 5);
  CHECK(large[3 * kHugePageSize + 4] == 2);
}

TEST_CASE("reserve_huge grows capacity only, keeping the contents", "[huge_pages]") {
  keel::Bytes b{1, 2, 3};
  keel::reserve_huge(b, 100);
  CHECK(b.capacity() >= 100);
  CHECK(b == keel::Bytes{1, 2, 3});
  keel::reserve_huge(b, kHugePageSize + 1);
  CHECK(b.capacity() == 2 * kHugePageSize);  // whole huge pages
  CHECK(b == keel::Bytes{1, 2, 3});
  const uint8_t* data = b.data();
  keel::reserve_huge(b, 10);  // never shrinks or moves
  CHECK(b.data() == data);
}

TEST_CASE("overwritable grows a reused buffer and never zero-fills a byte twice", "[huge_pages]") {
  keel::Bytes b;
  const std::span<uint8_t> first = keel::overwritable(b, 100);
  REQUIRE(first.size() == 100);
  std::memset(first.data(), 7, first.size());
  const std::span<uint8_t> smaller = keel::overwritable(b, 10);
  CHECK(smaller.size() == 10);
  CHECK(smaller.data() == first.data());
  CHECK(b.size() >= 100);  // not shrunk, so growing back to 100 fills nothing
  CHECK(keel::overwritable(b, 100)[50] == 7);
  const std::span<uint8_t> large = keel::overwritable(b, kHugePageSize + 1);
  REQUIRE(large.size() == kHugePageSize + 1);
  CHECK(b.capacity() == 2 * kHugePageSize);  // whole huge pages, all usable
  CHECK(b.size() == b.capacity());
  std::memset(large.data(), 9, large.size());
  CHECK(keel::overwritable(b, 5000).data() == large.data());
  CHECK(keel::overwritable(b, 2 * kHugePageSize)[kHugePageSize] == 9);
}

TEST_CASE("overwritable at least doubles, so creeping sizes reallocate rarely", "[huge_pages]") {
  keel::Bytes b;
  keel::overwritable(b, 1000);
  keel::overwritable(b, 1001);
  CHECK(b.capacity() >= 2000);
  size_t reallocations = 0;
  const uint8_t* data = b.data();
  for (size_t n = 1002; n <= 1 << 20; n += 997) {  // each a new largest size
    keel::overwritable(b, n);
    if (b.data() != data) ++reallocations;
    data = b.data();
  }
  CHECK(reallocations <= 12);
}
