// The gateway's end of the RDMA data plane (docs/rdma.md). It accepts client
// sessions on a thread of its own and, for a request carrying a signed
// x-amz-rdma-token, moves the payload one-sidedly at the exchange layer:
// PutObject and UploadPart RDMA READ the client's bytes into a server slot
// and feed them to the same body consumer an HTTP body goes to (so ETags,
// checksums, versioning and locks come out alike, in any bucket mode);
// GetObject RDMA WRITEs the bytes the handler would have streamed.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/config.h"
#include "gateway/exchange.h"
#include "gateway/metrics.h"
#include "gateway/request.h"
#include "gateway/sigv4_verify.h"
#include "targets/rdma/transport.h"

namespace keel::gateway {

// Whether a request of this operation moves its payload over RDMA when it carries a token.
bool carries_rdma_payload(Operation operation);

// The answer to a token the gateway does not serve over RDMA: 501
// NotImplemented with x-amz-rdma-reply: 501, so the client sends the request
// again with an HTTP body.
Response rdma_declined(const std::string& why, std::string_view resource, std::string_view request_id);

class RdmaPlane {
 public:
  // Listens at `at` (an address on the RDMA device's netdev) with slots of
  // `options.slot_size` bytes; throws Error(kTargetIo) when that fails.
  RdmaPlane(std::shared_ptr<targets::rdma::Transport> transport, const ListenAddress& at,
            const targets::rdma::SessionOptions& options, Metrics& metrics);
  ~RdmaPlane();  // stops accepting (within options.timeout)
  RdmaPlane(const RdmaPlane&) = delete;
  RdmaPlane& operator=(const RdmaPlane&) = delete;

  uint16_t port() const;
  size_t sessions() const;

  // `exchange` is the handler's answer to a request that carries a token and
  // an operation carries_rdma_payload(): its body is then fed from an RDMA
  // READ, or its GET response is written by RDMA into the client's buffer.
  // Refusals before any byte moved pass through as they are. Throws S3Error
  // (with x-amz-rdma-reply) for a malformed, unsigned or rejected token;
  // declines (rdma_declined) what does not fit a slot or the token's range.
  Exchange attach(const S3Request& request, const Authentication& auth, Operation operation, Exchange exchange,
                  std::string_view request_id);

 private:
  struct Session;
  class ReadBody;

  void accept_loop();
  // Drops the sessions whose clients have gone.
  void forget_gone_sessions();
  // The session the token names, bound to the first user who signed a
  // token for it; S3Error AccessDenied for an unknown one or another user's.
  std::shared_ptr<Session> session_for(const targets::rdma::Token& token, const std::string& user);
  // One READ or WRITE; TokenGuard's refusals become AccessDenied, a broken
  // session InternalError (and is forgotten).
  void transfer(Session& session, bool read, const targets::rdma::Token& token, const targets::rdma::Slot& slot);
  // The GET response's bytes (at most the token's length) written into the client's range.
  Response write_response(Session& session, const targets::rdma::Token& token, Response response,
                          const std::string& operation);

  std::shared_ptr<targets::rdma::Transport> transport_;
  std::unique_ptr<targets::rdma::Listener> listener_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::map<uint64_t, std::shared_ptr<Session>> sessions_;
  bool stopping_ = false;
  std::thread acceptor_;
};

}  // namespace keel::gateway
