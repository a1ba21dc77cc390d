// The S3 client's RDMA session with one server: connected on first use,
// shared by all requests (one rdma_cm connection, not one per request), and
// re-established after the server dropped or refused it. While no session can
// be had, requests go over HTTP; a new connection is tried after a pause.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "targets/rdma/transport.h"

namespace keel::targets::s3 {

class RdmaChannel {
 public:
  RdmaChannel(std::shared_ptr<rdma::Transport> transport, rdma::Endpoint server, rdma::SessionOptions options,
              std::chrono::milliseconds reconnect_pause = std::chrono::seconds(5));

  // The largest payload one request can move over RDMA (a slot).
  size_t max_transfer() const { return options_.slot_size; }

  // A registered slot for one request, connecting first if need be; nullopt
  // while there is no session (last_error() says why). Blocks while all
  // slots are lent out.
  std::optional<rdma::Slot> acquire();
  // The encoded one-use token for the slot's first `length` bytes on a live
  // session, reconnecting a broken or refused one; nullopt when that fails.
  std::optional<std::string> grant(const rdma::Slot& slot, uint64_t length);
  // The server refused the session (it restarted, or dropped it): the next
  // grant makes a new one.
  void distrust();

  uint64_t reconnects() const;
  std::string last_error() const;
  std::string describe() const;  // "rdma://169.254.77.1:7471"

 private:
  // Under mu_: a live session, or false after recording why not.
  bool ensure_session();

  std::shared_ptr<rdma::Transport> transport_;
  const rdma::Endpoint server_;
  const rdma::SessionOptions options_;
  const std::chrono::milliseconds reconnect_pause_;
  mutable std::mutex mu_;
  std::unique_ptr<rdma::ClientSession> session_;
  bool distrusted_ = false;
  std::chrono::steady_clock::time_point next_attempt_{};
  uint64_t reconnects_ = 0;
  std::string last_error_;
};

}  // namespace keel::targets::s3
