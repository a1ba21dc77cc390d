// An rdma_cm event channel whose events are waited for with a timeout and
// acknowledged at once (callers get a copy), so no event is left unacked.
#pragma once

#include <rdma/rdma_cma.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace keel::targets::rdma {

class CmChannel {
 public:
  struct Event {
    rdma_cm_event_type type;
    int status;
    rdma_cm_id* id;  // for CONNECT_REQUEST: the new connection's id
    rdma_conn_param conn;  // responder/initiator depths (private data copied below)
    std::vector<uint8_t> private_data;
  };

  CmChannel();  // throws Error(kTargetIo), e.g. ENODEV without RDMA
  CmChannel(const CmChannel&) = delete;
  CmChannel& operator=(const CmChannel&) = delete;
  ~CmChannel();

  rdma_event_channel* get() const { return channel_; }

  // The next event, or nullopt after `timeout`.
  std::optional<Event> next(std::chrono::milliseconds timeout);
  // The next event, which must be `type`; throws Error(kTargetIo) naming
  // `context` and what came instead (or the timeout).
  Event expect(rdma_cm_event_type type, std::chrono::milliseconds timeout, const std::string& context);
  // Reads the events that arrive within `grace` (0: those already there):
  // true once one says the connection is gone (DISCONNECTED,
  // DEVICE_REMOVAL, TIMEWAIT_EXIT), as when the peer process died.
  bool connection_gone(std::chrono::milliseconds grace);

 private:
  rdma_event_channel* channel_;
};

}  // namespace keel::targets::rdma
