#include "targets/rdma/completion_queue.h"

#include <fcntl.h>

#include <cerrno>

#include "util/error.h"

namespace keel::targets::rdma {

CompletionQueue::CompletionQueue(ibv_context* context, int depth) : channel_fd_(io_) {
  channel_ = ibv_create_comp_channel(context);
  if (!channel_) throw_errno("RDMA: ibv_create_comp_channel", errno);
  cq_ = ibv_create_cq(context, depth, nullptr, channel_, 0);
  if (!cq_) {
    int err = errno;
    ibv_destroy_comp_channel(channel_);
    throw_errno("RDMA: ibv_create_cq of depth " + std::to_string(depth), err);
  }
  int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    int err = errno;
    ibv_destroy_cq(cq_);
    ibv_destroy_comp_channel(channel_);
    throw_errno("RDMA: making the completion channel non-blocking", err);
  }
  channel_fd_.assign(channel_->fd);
}

CompletionQueue::~CompletionQueue() {
  channel_fd_.release();  // the fd belongs to the completion channel
  // Events read but not yet acknowledged would make ibv_destroy_cq block; next() acks each at once.
  ibv_destroy_cq(cq_);
  ibv_destroy_comp_channel(channel_);
}

ibv_wc CompletionQueue::next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ibv_wc wc{};
    int n = ibv_poll_cq(cq_, 1, &wc);
    if (n < 0) throw Error(ErrorKind::kTargetIo, "RDMA: ibv_poll_cq failed");
    if (n == 1) return wc;
    if (!armed_) {  // arm, then poll again: a completion may have landed in between
      if (int err = ibv_req_notify_cq(cq_, 0)) throw_errno("RDMA: ibv_req_notify_cq", err);
      armed_ = true;
      continue;
    }
    bool readable = false;
    channel_fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           [&readable](const boost::system::error_code& ec) { readable = !ec; });
    io_.restart();
    io_.run_until(deadline);
    if (!readable) {
      channel_fd_.cancel();
      io_.restart();
      io_.run();  // let the cancelled handler finish before `readable` goes out of scope
      if (std::chrono::steady_clock::now() >= deadline)
        throw Error(ErrorKind::kTargetIo, "RDMA: no work completion within " + std::to_string(timeout.count()) +
                                              " ms (peer gone or fabric stalled)");
      continue;
    }
    ibv_cq* event_cq = nullptr;
    void* event_context = nullptr;
    if (ibv_get_cq_event(channel_, &event_cq, &event_context) != 0) {
      if (errno == EAGAIN) continue;
      throw_errno("RDMA: ibv_get_cq_event", errno);
    }
    ibv_ack_cq_events(event_cq, 1);
    armed_ = false;
  }
}

}  // namespace keel::targets::rdma
