// Large I/O buffers, recycled: a fresh multi-MiB allocation costs a page
// fault per 4 KiB (a tenth of a backup's CPU when measured), so buffers are
// kept and, from 2 MiB up, on huge pages (util/huge_pages.h). At most
// `max_buffers` are out at once; get() blocks until one comes back, which
// bounds the memory of whoever reads through the pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "util/huge_pages.h"

namespace keel {

class BufferPool {
 public:
  BufferPool(size_t buffer_size, size_t max_buffers);
  ~BufferPool();  // every buffer must have come back

  // A buffer of buffer_size() bytes (contents undefined, 4 KiB-aligned); it
  // returns to the pool when the last shared_ptr to it goes.
  std::shared_ptr<uint8_t[]> get();
  // As get(), but null at once where get() would wait.
  std::shared_ptr<uint8_t[]> try_get();
  size_t buffer_size() const { return size_; }

 private:
  void put(uint8_t* p);
  std::shared_ptr<uint8_t[]> get(bool wait);

  size_t size_;
  size_t max_;
  std::mutex mu_;
  std::condition_variable returned_;
  size_t out_ = 0;
  std::vector<AlignedBuffer> free_;
};

}  // namespace keel
