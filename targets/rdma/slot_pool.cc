#include "targets/rdma/slot_pool.h"

#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <cerrno>
#include <string>
#include <utility>

#include "util/error.h"

namespace keel::targets::rdma {

Slot::Slot(Slot&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)), data_(o.data_) {}

Slot::~Slot() {
  if (pool_) pool_->put(data_);
}

SlotPool::SlotPool(size_t slot_size, size_t slot_count, ibv_pd* pd, Access access)
    : slot_size_(slot_size), bytes_(slot_size * slot_count) {
  if (slot_size == 0 || slot_count == 0) throw Error(ErrorKind::kUsage, "RDMA slot pool needs slots of non-zero size");
  // mmap: page-aligned memory, which registration pins page by page anyway.
  void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw_errno("RDMA slot pool: mmap of " + std::to_string(bytes_) + " bytes", errno);
  base_ = static_cast<uint8_t*>(mem);
  if (pd) {
    int flags = IBV_ACCESS_LOCAL_WRITE;
    if (access == Access::kRemote) flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    mr_ = ibv_reg_mr(pd, base_, bytes_, flags);
    if (!mr_) {
      int err = errno;
      munmap(base_, bytes_);
      throw_errno("RDMA slot pool: ibv_reg_mr of " + std::to_string(bytes_) +
                      " bytes (check `ulimit -l`, the locked-memory limit)", err);
    }
  }
  for (size_t i = slot_count; i-- > 0;) free_.push_back(base_ + i * slot_size);
}

SlotPool::~SlotPool() {
  if (mr_) ibv_dereg_mr(mr_);
  munmap(base_, bytes_);
}

Slot SlotPool::get() {
  std::unique_lock lock(mu_);
  freed_.wait(lock, [this] { return !free_.empty(); });
  uint8_t* p = free_.back();
  free_.pop_back();
  return Slot(this, {p, slot_size_});
}

void SlotPool::put(std::span<uint8_t> data) {
  {
    std::lock_guard lock(mu_);
    free_.push_back(data.data());
  }
  freed_.notify_one();
}

uint32_t SlotPool::lkey() const { return mr_ ? mr_->lkey : 0; }
uint32_t SlotPool::rkey() const { return mr_ ? mr_->rkey : 0; }

}  // namespace keel::targets::rdma
