#include "targets/rdma/verbs_transport.h"

#include <endian.h>
#include <openssl/rand.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "targets/rdma/availability.h"
#include "targets/rdma/cm_channel.h"
#include "targets/rdma/completion_queue.h"
#include "targets/rdma/token_guard.h"
#include "util/error.h"

namespace keel::targets::rdma {
namespace {

// Outstanding RDMA READs a session allows in each direction; rxe and every
// current HCA support at least this many.
constexpr uint8_t kReadDepth = 4;
constexpr int kQueueDepth = 8;

// Connect-request private data ("hello", 24 bytes: fits IB's 56) and the
// accept's ("welcome", 12 bytes); integers big-endian.
constexpr char kMagic[4] = {'K', 'R', 'C', '1'};
constexpr size_t kHelloSize = 4 + 8 + 8 + 4;
constexpr size_t kWelcomeSize = 4 + 8;

template <typename T>
void put_be(uint8_t* at, T value) {
  if constexpr (sizeof(T) == 8) value = htobe64(value);
  else value = htobe32(value);
  std::memcpy(at, &value, sizeof value);
}
template <typename T>
T get_be(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  if constexpr (sizeof(T) == 8) return be64toh(value);
  else return be32toh(value);
}

std::array<uint8_t, kHelloSize> encode_hello(const RemoteRegion& r) {
  std::array<uint8_t, kHelloSize> b{};
  std::memcpy(b.data(), kMagic, 4);
  put_be(b.data() + 4, r.address);
  put_be(b.data() + 12, r.length);
  put_be(b.data() + 20, r.rkey);
  return b;
}
std::optional<RemoteRegion> decode_hello(const std::vector<uint8_t>& b) {
  if (b.size() < kHelloSize || std::memcmp(b.data(), kMagic, 4) != 0) return std::nullopt;
  return RemoteRegion{get_be<uint64_t>(b.data() + 4), get_be<uint64_t>(b.data() + 12), get_be<uint32_t>(b.data() + 20)};
}

std::string where(const Endpoint& e) { return e.host + ":" + std::to_string(e.port); }

struct AddrInfoDeleter {
  void operator()(rdma_addrinfo* a) const { rdma_freeaddrinfo(a); }
};
std::unique_ptr<rdma_addrinfo, AddrInfoDeleter> resolve(const Endpoint& e, bool passive) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  rdma_addrinfo* res = nullptr;
  std::string port = std::to_string(e.port);
  if (rdma_getaddrinfo(e.host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
    throw_errno("RDMA: rdma_getaddrinfo(" + where(e) + ")", errno);
  return std::unique_ptr<rdma_addrinfo, AddrInfoDeleter>(res);
}

struct PdDeleter {
  void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
using UniquePd = std::unique_ptr<ibv_pd, PdDeleter>;
UniquePd alloc_pd(ibv_context* context) {
  if (!context) throw Error(ErrorKind::kTargetIo, "RDMA: the address is not on an RDMA device's network interface");
  ibv_pd* pd = ibv_alloc_pd(context);
  if (!pd) throw_errno("RDMA: ibv_alloc_pd on " + std::string(ibv_get_device_name(context->device)), errno);
  return UniquePd(pd);
}

// A protection domain and the slot pool registered in it; shared by a
// listener and its sessions, or kept by a client across reconnects.
struct Registered {
  Registered(ibv_context* context, const SessionOptions& o, SlotPool::Access access)
      : pd(alloc_pd(context)), pool(o.slot_size, o.slot_count, pd.get(), access) {}
  UniquePd pd;
  SlotPool pool;
};

// One rdma_cm id and, once connected, its RC queue pair and completion queue.
class Connection {
 public:
  explicit Connection(CmChannel& channel) {
    if (rdma_create_id(channel.get(), &id_, nullptr, RDMA_PS_TCP) != 0) throw_errno("RDMA: rdma_create_id", errno);
  }
  explicit Connection(rdma_cm_id* accepted) : id_(accepted) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (qp_created_) {
      rdma_disconnect(id_);  // tell the peer now, not when its timers fire
      rdma_destroy_qp(id_);
    }
    cq_.reset();
    rdma_destroy_id(id_);
  }

  rdma_cm_id* id() const { return id_; }
  CompletionQueue& cq() { return *cq_; }

  void create_qp(ibv_pd* pd) {
    if (id_->verbs != pd->context)
      throw Error(ErrorKind::kTargetIo, "RDMA: the connection is on another device than the registered pool");
    cq_ = std::make_unique<CompletionQueue>(id_->verbs, kQueueDepth);
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = cq_->get();
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = kQueueDepth;
    attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id_, pd, &attr) != 0) throw_errno("RDMA: rdma_create_qp (RC)", errno);
    qp_created_ = true;
  }

 private:
  rdma_cm_id* id_ = nullptr;
  std::unique_ptr<CompletionQueue> cq_;
  bool qp_created_ = false;
};

class VerbsServerSession : public ServerSession {
 public:
  VerbsServerSession(std::shared_ptr<Registered> registered, std::unique_ptr<CmChannel> channel,
                     std::unique_ptr<Connection> connection, uint64_t session, RemoteRegion client,
                     std::chrono::milliseconds timeout)
      : registered_(std::move(registered)),
        channel_(std::move(channel)),
        connection_(std::move(connection)),
        session_(session),
        guard_(session, client),
        timeout_(timeout) {}
  ~VerbsServerSession() override { connection_.reset(); }  // before its channel

  uint64_t session_id() const override { return session_; }
  void read(const Token& token, const Slot& into) override { transfer(IBV_WR_RDMA_READ, token, into); }
  void write(const Token& token, const Slot& from) override { transfer(IBV_WR_RDMA_WRITE, token, from); }

  bool alive(std::chrono::milliseconds grace) override {
    std::lock_guard lock(mu_);
    if (!broken_ && channel_->connection_gone(grace)) broken_ = true;
    return !broken_;
  }

 private:
  // Several requests of one client may move their bytes at once: each posts
  // its work request (at most kQueueDepth out on the queue pair) and waits
  // for its own completion.
  void transfer(ibv_wr_opcode opcode, const Token& token, const Slot& local) {
    const char* what = opcode == IBV_WR_RDMA_READ ? "RDMA READ" : "RDMA WRITE";
    if (&local.pool() != &registered_->pool)
      throw Error(ErrorKind::kUsage, std::string(what) + ": the local slot is not from the server's registered pool");
    // An sge carries at most 4 GiB - 1; slots are far smaller in practice.
    guard_.admit(token, std::min<uint64_t>(local.data().size(), std::numeric_limits<uint32_t>::max()));
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    std::unique_lock lock(mu_);
    changed_.wait_until(lock, deadline, [&] { return broken_ || outstanding_ < kQueueDepth; });
    if (broken_) throw Error(ErrorKind::kTargetIo, "RDMA: session " + std::to_string(session_) + " is broken");
    if (outstanding_ >= kQueueDepth)
      throw Error(ErrorKind::kTargetIo, std::string(what) + ": no room on the queue pair within " +
                                            std::to_string(timeout_.count()) + " ms");
    ibv_sge sge{local.address(), static_cast<uint32_t>(token.length), registered_->pool.lkey()};
    ibv_send_wr wr{};
    wr.wr_id = ++last_wr_;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = token.address;
    wr.wr.rdma.rkey = token.rkey;
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(connection_->id()->qp, &wr, &bad)) throw_errno(std::string(what) + ": ibv_post_send", err);
    ++outstanding_;
    struct Returned {  // the slot on the queue pair, however the wait ends (mu_ is held then)
      VerbsServerSession& session;
      ~Returned() {
        --session.outstanding_;
        session.changed_.notify_all();
      }
    } returned{*this};
    const ibv_wc wc = completion_of(lock, wr.wr_id, deadline);
    if (wc.status != IBV_WC_SUCCESS) {
      broken_ = true;  // the queue pair is in error: every operation still out is flushed
      throw Error(ErrorKind::kTargetIo, std::string(what) + " of " + std::to_string(token.length) +
                                            " bytes for session " + std::to_string(session_) +
                                            " failed: " + ibv_wc_status_str(wc.status));
    }
  }

  // The completion of work request `wr_id`. Whichever waiter finds nobody
  // polling polls the completion queue (it is not safe to poll from two
  // threads) and files what it gets for its owner. Called with mu_ held.
  ibv_wc completion_of(std::unique_lock<std::mutex>& lock, uint64_t wr_id,
                       std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      if (auto it = completed_.find(wr_id); it != completed_.end()) {
        const ibv_wc wc = it->second;
        completed_.erase(it);
        return wc;
      }
      if (broken_) throw Error(ErrorKind::kTargetIo, "RDMA: session " + std::to_string(session_) + " broke meanwhile");
      if (polling_) {
        // Past its deadline a waiter waits for the poller (bounded by the
        // poller's own deadline), then polls once itself and gives up.
        if (std::chrono::steady_clock::now() < deadline) {
          changed_.wait_until(lock, deadline);
        } else {
          changed_.wait(lock);
        }
        continue;
      }
      polling_ = true;
      lock.unlock();
      std::optional<ibv_wc> wc;
      std::string failure;
      try {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        wc = connection_->cq().next(std::max(left, std::chrono::milliseconds(0)));
      } catch (const Error& e) {
        failure = e.what();
      }
      lock.lock();
      polling_ = false;
      changed_.notify_all();
      if (!wc) {
        broken_ = true;  // an operation is still out, or the queue failed
        throw Error(ErrorKind::kTargetIo, failure);
      }
      completed_[wc->wr_id] = *wc;
    }
  }

  std::shared_ptr<Registered> registered_;
  std::unique_ptr<CmChannel> channel_;
  std::unique_ptr<Connection> connection_;
  const uint64_t session_;
  TokenGuard guard_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable changed_;  // room on the queue pair, a completion filed, the poller gone
  std::map<uint64_t, ibv_wc> completed_;  // by wr_id, until their owners take them
  int outstanding_ = 0;
  bool polling_ = false;
  uint64_t last_wr_ = 0;
  bool broken_ = false;
};

class VerbsListener : public Listener {
 public:
  VerbsListener(const Endpoint& at, const SessionOptions& options)
      : options_(options), listening_(std::make_unique<Connection>(channel_)) {
    auto addr = resolve(at, true);
    if (rdma_bind_addr(listening_->id(), addr->ai_src_addr) != 0) throw_errno("RDMA: rdma_bind_addr(" + where(at) + ")", errno);
    if (rdma_listen(listening_->id(), 16) != 0) throw_errno("RDMA: rdma_listen(" + where(at) + ")", errno);
    // Binding to a device's address ties the id to that device.
    registered_ = std::make_shared<Registered>(listening_->id()->verbs, options_, SlotPool::Access::kLocal);
  }
  ~VerbsListener() override { listening_.reset(); }  // before its channel

  uint16_t port() const override { return be16toh(rdma_get_src_port(listening_->id())); }
  SlotPool& pool() override { return registered_->pool; }

  std::unique_ptr<ServerSession> accept() override {
    auto request = channel_.expect(RDMA_CM_EVENT_CONNECT_REQUEST, options_.timeout, "waiting for a client");
    auto channel = std::make_unique<CmChannel>();  // declared first: outlives the id moved onto it
    auto connection = std::make_unique<Connection>(request.id);
    auto client = decode_hello(request.private_data);
    // The event states depths from our side: initiator_depth is how many
    // READs we may have outstanding, i.e. the client's responder resources.
    if (!client || request.conn.initiator_depth == 0) {
      rdma_reject(request.id, nullptr, 0);
      throw Error(ErrorKind::kTargetIo, client ? "RDMA: rejected a client that accepts no RDMA READs"
                                               : "RDMA: rejected a connect request without a keel-rc-1 hello");
    }
    if (rdma_migrate_id(request.id, channel->get()) != 0) throw_errno("RDMA: rdma_migrate_id", errno);
    connection->create_qp(registered_->pd.get());

    uint64_t session = 0;
    while (session == 0)
      if (RAND_bytes(reinterpret_cast<uint8_t*>(&session), sizeof session) != 1)
        throw Error(ErrorKind::kFailure, "RAND_bytes failed while making an RDMA session id");
    std::array<uint8_t, kWelcomeSize> welcome{};
    std::memcpy(welcome.data(), kMagic, 4);
    put_be(welcome.data() + 4, session);
    rdma_conn_param param{};
    param.private_data = welcome.data();
    param.private_data_len = welcome.size();
    param.initiator_depth = std::min(kReadDepth, request.conn.initiator_depth);
    param.responder_resources = 0;  // the client never reads from the server
    param.rnr_retry_count = 7;
    if (rdma_accept(request.id, &param) != 0) throw_errno("RDMA: rdma_accept", errno);
    channel->expect(RDMA_CM_EVENT_ESTABLISHED, options_.timeout, "accepting a client");
    return std::make_unique<VerbsServerSession>(registered_, std::move(channel), std::move(connection), session,
                                                *client, options_.timeout);
  }

 private:
  SessionOptions options_;
  CmChannel channel_;
  std::unique_ptr<Connection> listening_;
  std::shared_ptr<Registered> registered_;
};

class VerbsClientSession : public ClientSession {
 public:
  VerbsClientSession(const Endpoint& server, const SessionOptions& options) : server_(server), options_(options) {
    connect();
  }
  ~VerbsClientSession() override { connection_.reset(); }  // before its channel

  uint64_t session_id() const override { return session_; }

  bool alive(std::chrono::milliseconds grace) override {
    if (!broken_ && channel_.connection_gone(grace)) broken_ = true;
    return !broken_;
  }

  void reconnect() override {
    connection_.reset();
    connect();
  }

 protected:
  SlotPool& pool() override { return registered_->pool; }

 private:
  void connect() {
    broken_ = true;
    auto connection = std::make_unique<Connection>(channel_);
    const auto timeout_ms = static_cast<int>(options_.timeout.count());
    auto addr = resolve(server_, false);
    if (rdma_resolve_addr(connection->id(), nullptr, addr->ai_dst_addr, timeout_ms) != 0)
      throw_errno("RDMA: rdma_resolve_addr(" + where(server_) + ")", errno);
    channel_.expect(RDMA_CM_EVENT_ADDR_RESOLVED, options_.timeout, "resolving " + where(server_));
    if (rdma_resolve_route(connection->id(), timeout_ms) != 0)
      throw_errno("RDMA: rdma_resolve_route(" + where(server_) + ")", errno);
    channel_.expect(RDMA_CM_EVENT_ROUTE_RESOLVED, options_.timeout, "routing to " + where(server_));
    // Registered once, on the first connection's device, and kept across reconnects.
    if (!registered_)
      registered_ = std::make_unique<Registered>(connection->id()->verbs, options_, SlotPool::Access::kRemote);
    connection->create_qp(registered_->pd.get());

    auto hello = encode_hello({registered_->pool.address(), registered_->pool.length(), registered_->pool.rkey()});
    rdma_conn_param param{};
    param.private_data = hello.data();
    param.private_data_len = hello.size();
    param.responder_resources = kReadDepth;  // the server's READs of our pool
    param.initiator_depth = 0;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (rdma_connect(connection->id(), &param) != 0) throw_errno("RDMA: rdma_connect(" + where(server_) + ")", errno);
    auto established = channel_.expect(RDMA_CM_EVENT_ESTABLISHED, options_.timeout, "connecting to " + where(server_));
    const auto& w = established.private_data;
    if (w.size() < kWelcomeSize || std::memcmp(w.data(), kMagic, 4) != 0)
      throw Error(ErrorKind::kTargetIo, "RDMA: " + where(server_) + " accepted without a keel-rc-1 welcome");
    session_ = get_be<uint64_t>(w.data() + 4);
    connection_ = std::move(connection);
    broken_ = false;
  }

  const Endpoint server_;
  const SessionOptions options_;
  CmChannel channel_;
  std::unique_ptr<Registered> registered_;
  std::unique_ptr<Connection> connection_;
  uint64_t session_ = 0;
  bool broken_ = true;
};

class VerbsTransport : public Transport {
 public:
  std::unique_ptr<Listener> listen(const Endpoint& at, const SessionOptions& options) override {
    return std::make_unique<VerbsListener>(at, options);
  }
  std::unique_ptr<ClientSession> connect(const Endpoint& server, const SessionOptions& options) override {
    return std::make_unique<VerbsClientSession>(server, options);
  }
};

}  // namespace

std::unique_ptr<Transport> make_verbs_transport() {
  if (auto reason = rdma_unavailable_reason()) throw Error(ErrorKind::kTargetIo, "RDMA disabled: " + *reason);
  return std::make_unique<VerbsTransport>();
}

}  // namespace keel::targets::rdma
