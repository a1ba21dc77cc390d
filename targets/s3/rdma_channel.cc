#include "targets/s3/rdma_channel.h"

#include "util/error.h"

namespace keel::targets::s3 {

RdmaChannel::RdmaChannel(std::shared_ptr<rdma::Transport> transport, rdma::Endpoint server,
                         rdma::SessionOptions options, std::chrono::milliseconds reconnect_pause)
    : transport_(std::move(transport)),
      server_(std::move(server)),
      options_(options),
      reconnect_pause_(reconnect_pause) {}

std::string RdmaChannel::describe() const { return "rdma://" + server_.host + ":" + std::to_string(server_.port); }

bool RdmaChannel::ensure_session() {
  const bool usable = session_ && !distrusted_ && session_->alive(std::chrono::milliseconds(0));
  if (usable) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) return false;
  try {
    if (session_) {
      session_->reconnect();
      ++reconnects_;
    } else {
      session_ = transport_->connect(server_, options_);
    }
    distrusted_ = false;
    return true;
  } catch (const Error& e) {
    // Not worth a try per request: HTTP carries the bytes until the pause is over.
    last_error_ = describe() + ": " + e.what();
    next_attempt_ = now + reconnect_pause_;
    return false;
  }
}

std::optional<rdma::Slot> RdmaChannel::acquire() {
  rdma::ClientSession* session = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!ensure_session()) return std::nullopt;
    session = session_.get();
  }
  // The session object, and so its pool, lives as long as the channel; a
  // reconnect keeps the pool. Waiting for a slot must not block grants.
  return session->acquire();
}

std::optional<std::string> RdmaChannel::grant(const rdma::Slot& slot, uint64_t length) {
  std::lock_guard lock(mu_);
  if (!ensure_session()) return std::nullopt;
  return session_->grant(slot, length).encode();
}

void RdmaChannel::distrust() {
  std::lock_guard lock(mu_);
  distrusted_ = true;
}

uint64_t RdmaChannel::reconnects() const {
  std::lock_guard lock(mu_);
  return reconnects_;
}

std::string RdmaChannel::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

}  // namespace keel::targets::s3
