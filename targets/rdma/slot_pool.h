// A registered buffer pool: one memory region, registered once, cut into
// fixed-size slots that requests borrow and give back. Nothing is registered
// per request. A client lends a slot to the server for one request and must
// not touch it until that request's response has arrived.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

struct ibv_mr;
struct ibv_pd;

namespace keel::targets::rdma {

class SlotPool;

// One borrowed slot; goes back to its pool when destroyed.
class Slot {
 public:
  Slot(Slot&& o) noexcept;
  Slot& operator=(Slot&&) = delete;
  Slot(const Slot&) = delete;
  ~Slot();

  std::span<uint8_t> data() const { return data_; }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(data_.data()); }
  const SlotPool& pool() const { return *pool_; }

 private:
  friend class SlotPool;
  Slot(SlotPool* pool, std::span<uint8_t> data) : pool_(pool), data_(data) {}
  SlotPool* pool_;
  std::span<uint8_t> data_;
};

class SlotPool {
 public:
  enum class Access { kLocal, kRemote };  // kRemote: peers may READ and WRITE it

  // `pd` null: plain memory (the loopback transport); keys are then 0.
  // Throws Error(kTargetIo) naming the verbs call when registration fails.
  SlotPool(size_t slot_size, size_t slot_count, ibv_pd* pd, Access access);
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;
  ~SlotPool();  // every Slot must be back

  // Blocks until a slot is free.
  Slot get();

  size_t slot_size() const { return slot_size_; }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(base_); }
  uint64_t length() const { return bytes_; }
  uint32_t lkey() const;
  uint32_t rkey() const;

 private:
  friend class Slot;
  void put(std::span<uint8_t> data);

  size_t slot_size_;
  size_t bytes_;
  uint8_t* base_;
  ibv_mr* mr_ = nullptr;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<uint8_t*> free_;
};

}  // namespace keel::targets::rdma
