#include "util/buffer_pool.h"

#include <algorithm>

namespace keel {

BufferPool::BufferPool(size_t buffer_size, size_t max_buffers)
    : size_(buffer_size), max_(std::max<size_t>(1, max_buffers)) {}

BufferPool::~BufferPool() = default;

std::shared_ptr<uint8_t[]> BufferPool::get() { return get(/*wait=*/true); }

std::shared_ptr<uint8_t[]> BufferPool::try_get() { return get(/*wait=*/false); }

std::shared_ptr<uint8_t[]> BufferPool::get(bool wait) {
  AlignedBuffer buf;
  {
    std::unique_lock lock(mu_);
    if (!wait && out_ == max_) return nullptr;
    returned_.wait(lock, [this] { return out_ < max_; });
    ++out_;
    if (!free_.empty()) {
      buf = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (!buf) {
    try {
      buf = allocate_aligned(size_);
    } catch (...) {
      put(nullptr);
      throw;
    }
  }
  return std::shared_ptr<uint8_t[]>(buf.release(), [this](uint8_t* p) { put(p); });
}

void BufferPool::put(uint8_t* p) {
  AlignedBuffer buf(p);
  {
    std::lock_guard lock(mu_);
    --out_;
    if (buf) free_.push_back(std::move(buf));
  }
  returned_.notify_one();
}

}  // namespace keel
