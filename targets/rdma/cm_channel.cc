#include "targets/rdma/cm_channel.h"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "util/error.h"

namespace keel::targets::rdma {

CmChannel::CmChannel() : channel_(rdma_create_event_channel()) {
  if (!channel_) throw_errno("RDMA: rdma_create_event_channel", errno);
  // Non-blocking, so next() can bound its wait with poll(2).
  int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    int err = errno;
    rdma_destroy_event_channel(channel_);
    throw_errno("RDMA: making the rdma_cm event channel non-blocking", err);
  }
}

CmChannel::~CmChannel() { rdma_destroy_event_channel(channel_); }

std::optional<CmChannel::Event> CmChannel::next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    rdma_cm_event* raw = nullptr;
    if (rdma_get_cm_event(channel_, &raw) == 0) {
      Event e{raw->event, raw->status, raw->id, raw->param.conn, {}};
      const auto* data = static_cast<const uint8_t*>(raw->param.conn.private_data);
      if (data) e.private_data.assign(data, data + raw->param.conn.private_data_len);
      e.conn.private_data = nullptr;
      e.conn.private_data_len = 0;
      rdma_ack_cm_event(raw);
      return e;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw_errno("RDMA: rdma_get_cm_event", errno);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{channel_->fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) throw_errno("RDMA: poll on rdma_cm", errno);
  }
}

CmChannel::Event CmChannel::expect(rdma_cm_event_type type, std::chrono::milliseconds timeout,
                                   const std::string& context) {
  auto e = next(timeout);
  if (!e)
    throw Error(ErrorKind::kTargetIo, "RDMA: " + context + ": no " + rdma_event_str(type) + " within " +
                                          std::to_string(timeout.count()) + " ms");
  if (e->type != type)
    throw Error(ErrorKind::kTargetIo, "RDMA: " + context + ": got " + rdma_event_str(e->type) + " (status " +
                                          std::to_string(e->status) + ") instead of " + rdma_event_str(type));
  return *e;
}

bool CmChannel::connection_gone(std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto event = next(std::max(left, std::chrono::milliseconds(0)));
    if (!event) return false;
    if (event->type == RDMA_CM_EVENT_DISCONNECTED || event->type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
        event->type == RDMA_CM_EVENT_TIMEWAIT_EXIT)
      return true;
  }
}

}  // namespace keel::targets::rdma
