#include "gateway/rdma_plane.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "targets/rdma/s3_headers.h"
#include "util/error.h"

namespace keel::gateway {

namespace rdma = targets::rdma;

namespace {

// A verbs client's session is in the registry once accept() returns, which
// may be a moment after the client saw it established and sent a request.
constexpr auto kSessionArrival = std::chrono::seconds(1);

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// An S3 error that also says, in x-amz-rdma-reply, that the RDMA path refused it.
S3Error refused(std::string_view code, const std::string& message) {
  S3Error error(code, message);
  error.headers.emplace_back(rdma::kReplyHeader, std::to_string(error.http_status()));
  return error;
}

}  // namespace

bool carries_rdma_payload(Operation operation) {
  return operation == Operation::kPutObject || operation == Operation::kUploadPart || operation == Operation::kGetObject;
}

Response rdma_declined(const std::string& why, std::string_view resource, std::string_view request_id) {
  return error_response(refused("NotImplemented", "RDMA declined: " + why + "; send the payload over HTTP"), resource,
                        request_id);
}

struct RdmaPlane::Session {
  std::unique_ptr<rdma::ServerSession> transport;
  std::string owner;  // the user whose signed requests may use it; empty until the first
};

// A request body that arrives by RDMA READ when the (empty) HTTP body has
// ended, and then goes to the operation's own body consumer.
class RdmaPlane::ReadBody final : public RequestBody {
 public:
  ReadBody(RdmaPlane& plane, std::shared_ptr<Session> session, rdma::Token token, std::unique_ptr<RequestBody> body,
           std::string operation)
      : plane_(plane),
        session_(std::move(session)),
        token_(token),
        body_(std::move(body)),
        operation_(std::move(operation)) {}

  void write(ByteView data) override {
    if (!data.empty()) throw refused("InvalidRequest", "a request with an x-amz-rdma-token carries no HTTP body");
  }

  Response finish() override {
    const auto started = std::chrono::steady_clock::now();
    rdma::Slot slot = plane_.listener_->pool().get();
    plane_.transfer(*session_, true, token_, slot);
    const double seconds = seconds_since(started);
    body_->write(ByteView(slot.data().data(), token_.length));
    Response response = body_->finish();
    response.headers.emplace_back(rdma::kReplyHeader, std::to_string(response.status));
    plane_.metrics_.record_rdma(operation_, token_.length, seconds);
    return response;
  }

 private:
  RdmaPlane& plane_;
  std::shared_ptr<Session> session_;
  const rdma::Token token_;
  std::unique_ptr<RequestBody> body_;
  const std::string operation_;
};

RdmaPlane::RdmaPlane(std::shared_ptr<rdma::Transport> transport, const ListenAddress& at,
                     const rdma::SessionOptions& options, Metrics& metrics)
    : transport_(std::move(transport)),
      listener_(transport_->listen(rdma::Endpoint{at.host, at.port}, options)),
      metrics_(metrics),
      acceptor_([this] { accept_loop(); }) {}

RdmaPlane::~RdmaPlane() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  acceptor_.join();
}

uint16_t RdmaPlane::port() const { return listener_->port(); }

size_t RdmaPlane::sessions() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void RdmaPlane::forget_gone_sessions() {
  std::vector<std::pair<uint64_t, std::shared_ptr<Session>>> known;
  {
    std::lock_guard lock(mu_);
    known.assign(sessions_.begin(), sessions_.end());
  }
  std::vector<uint64_t> gone;
  for (const auto& [id, session] : known) {
    if (!session->transport->alive(std::chrono::milliseconds(0))) gone.push_back(id);
  }
  if (gone.empty()) return;
  std::lock_guard lock(mu_);
  for (uint64_t id : gone) sessions_.erase(id);
  metrics_.set_rdma_sessions(sessions_.size());
}

void RdmaPlane::accept_loop() {
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    // Clients that ended (every keel run is one) leave their sessions here;
    // looked at between accepts, at least once per accept timeout.
    forget_gone_sessions();
    std::unique_ptr<rdma::ServerSession> accepted;
    try {
      accepted = listener_->accept();
    } catch (const Error&) {
      continue;  // nobody came within the timeout, or a client without a keel-rc-1 hello
    }
    const uint64_t id = accepted->session_id();
    {
      std::lock_guard lock(mu_);
      sessions_[id] = std::make_shared<Session>(Session{std::move(accepted), ""});
      metrics_.set_rdma_sessions(sessions_.size());
    }
    arrived_.notify_all();
  }
}

std::shared_ptr<RdmaPlane::Session> RdmaPlane::session_for(const rdma::Token& token, const std::string& user) {
  std::unique_lock lock(mu_);
  arrived_.wait_for(lock, kSessionArrival, [&] { return sessions_.contains(token.session); });
  const auto it = sessions_.find(token.session);
  if (it == sessions_.end()) {
    throw refused("AccessDenied", "RDMA token rejected: session " + std::to_string(token.session) +
                                      " is not known here (reconnect)");
  }
  Session& session = *it->second;
  if (session.owner.empty()) session.owner = user;
  if (session.owner != user) {
    throw refused("AccessDenied", "RDMA token rejected: session " + std::to_string(token.session) +
                                      " belongs to another user");
  }
  return it->second;
}

void RdmaPlane::transfer(Session& session, bool read, const rdma::Token& token, const rdma::Slot& slot) {
  try {
    if (read) {
      session.transport->read(token, slot);
    } else {
      session.transport->write(token, slot);
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kUsage) throw refused("AccessDenied", e.what());
    {
      std::lock_guard lock(mu_);
      sessions_.erase(session.transport->session_id());
      metrics_.set_rdma_sessions(sessions_.size());
    }
    throw refused("InternalError", e.what());
  }
}

Exchange RdmaPlane::attach(const S3Request& request, const Authentication& auth, Operation operation,
                           Exchange exchange, std::string_view request_id) {
  const std::string name(operation_name(operation));
  // Refused before any byte would move (NoSuchKey, AccessDenied): answered as over HTTP.
  if (!exchange.body && exchange.response.status / 100 != 2) return exchange;
  rdma::Token token;
  try {
    token = rdma::Token::parse(request.header(rdma::kTokenHeader));
  } catch (const Error& e) {
    throw refused("InvalidArgument", e.what());
  }
  const auto& signed_headers = auth.signed_headers;
  if (std::find(signed_headers.begin(), signed_headers.end(), rdma::kTokenHeader) == signed_headers.end()) {
    throw refused("AccessDenied", "RDMA token rejected: x-amz-rdma-token must be a signed header");
  }
  const auto decline = [&](const std::string& why) {
    metrics_.record_rdma_declined(name);
    return Exchange{rdma_declined(why, request.resource(), request_id), nullptr, exchange.operation};
  };
  if (token.length > listener_->pool().slot_size()) {
    return decline("the token's " + std::to_string(token.length) + " bytes exceed this gateway's " +
                   std::to_string(listener_->pool().slot_size()) + "-byte slots");
  }
  if (!exchange.body) {
    const uint64_t length = exchange.response.stream ? exchange.response.stream_length : exchange.response.body.size();
    if (length > token.length) {
      return decline("the response has " + std::to_string(length) + " bytes, the token room for " +
                     std::to_string(token.length));
    }
  }
  std::shared_ptr<Session> session = session_for(token, auth.user->name);
  if (exchange.body) {
    if (!request.has_header("x-amz-checksum-crc32c")) {
      throw refused("InvalidRequest", "an upload over RDMA needs x-amz-checksum-crc32c of its bytes");
    }
    exchange.body = std::make_unique<ReadBody>(*this, std::move(session), token, std::move(exchange.body), name);
    return exchange;
  }
  exchange.response = write_response(*session, token, std::move(exchange.response), name);
  return exchange;
}

Response RdmaPlane::write_response(Session& session, const rdma::Token& token, Response response,
                                   const std::string& operation) {
  const uint64_t length = response.stream ? response.stream_length : response.body.size();
  const auto started = std::chrono::steady_clock::now();
  rdma::Slot slot = listener_->pool().get();
  std::span<uint8_t> bytes = slot.data().first(length);
  if (response.stream) {
    for (size_t done = 0; done < length;) {
      const size_t n = response.stream->read(bytes.subspan(done));
      if (n == 0) throw Error(ErrorKind::kTargetIo, "object ended before its recorded length");
      done += n;
    }
  } else {
    std::copy(response.body.begin(), response.body.end(), bytes.begin());
  }
  if (length > 0) {
    // The server may move fewer bytes than the token allows (the object ends first).
    rdma::Token shorter = token;
    shorter.length = length;
    transfer(session, false, shorter, slot);
  }
  metrics_.record_rdma(operation, length, seconds_since(started));
  response.stream.reset();
  response.stream_length = 0;
  response.body.clear();
  response.headers.emplace_back(rdma::kReplyHeader, std::to_string(response.status));
  response.headers.emplace_back(rdma::kBytesTransferredHeader, std::to_string(length));
  return response;
}

}  // namespace keel::gateway
