// A completion queue with its completion channel. Waiting for a completion
// sleeps in the Asio event loop on the channel's fd (a posix
// stream_descriptor) and never spins: the CQ is armed, polled once more to
// close the race, and read only when the kernel signals it.
#pragma once

#include <infiniband/verbs.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>

namespace keel::targets::rdma {

class CompletionQueue {
 public:
  CompletionQueue(ibv_context* context, int depth);  // throws Error(kTargetIo)
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ~CompletionQueue();

  ibv_cq* get() const { return cq_; }

  // The next work completion (any status); throws Error(kTargetIo) after `timeout`.
  ibv_wc next(std::chrono::milliseconds timeout);

 private:
  boost::asio::io_context io_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  boost::asio::posix::stream_descriptor channel_fd_;
  bool armed_ = false;
};

}  // namespace keel::targets::rdma
