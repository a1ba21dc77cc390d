#include "targets/rdma/loopback_transport.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "targets/rdma/token_guard.h"
#include "util/error.h"

namespace keel::targets::rdma {
namespace {

// One connection between a client and a server session.
struct Link {
  uint64_t session;
  RemoteRegion client_region;
  std::mutex mu;  // held while bytes move, so neither end vanishes meanwhile
  std::condition_variable closed_cv;
  bool open = true;

  // False once closed; waits up to `grace` for that.
  bool stays_open(std::chrono::milliseconds grace) {
    std::unique_lock lock(mu);
    return !closed_cv.wait_for(lock, grace, [this] { return !open; });
  }

  void close() {
    {
      std::lock_guard lock(mu);
      open = false;
    }
    closed_cv.notify_all();
  }
};

struct ListenerState {
  std::mutex mu;
  std::condition_variable arrived;
  std::deque<std::shared_ptr<Link>> pending;
};

struct Fabric {
  std::mutex mu;
  std::map<uint16_t, std::weak_ptr<ListenerState>> listeners;
  uint16_t next_port = 1;
  uint64_t next_session = 1;

  std::shared_ptr<Link> dial(uint16_t port, RemoteRegion region) {
    std::shared_ptr<ListenerState> listener;
    auto link = std::make_shared<Link>();
    {
      std::lock_guard lock(mu);
      auto it = listeners.find(port);
      if (it != listeners.end()) listener = it->second.lock();
      link->session = next_session++;
    }
    if (!listener) throw Error(ErrorKind::kTargetIo, "RDMA loopback: nothing listens on port " + std::to_string(port));
    link->client_region = region;
    {
      std::lock_guard lock(listener->mu);
      listener->pending.push_back(link);
    }
    listener->arrived.notify_one();
    return link;
  }
};

class LoopbackServerSession : public ServerSession {
 public:
  explicit LoopbackServerSession(std::shared_ptr<Link> link)
      : link_(std::move(link)), guard_(link_->session, link_->client_region) {}
  ~LoopbackServerSession() override { link_->close(); }

  uint64_t session_id() const override { return link_->session; }

  void read(const Token& token, const Slot& into) override {
    guard_.admit(token, into.data().size());
    move(token, [&](uint8_t* client) { std::memcpy(into.data().data(), client, token.length); });
  }

  void write(const Token& token, const Slot& from) override {
    guard_.admit(token, from.data().size());
    move(token, [&](uint8_t* client) { std::memcpy(client, from.data().data(), token.length); });
  }

  bool alive(std::chrono::milliseconds grace) override { return link_->stays_open(grace); }

 private:
  template <typename Copy>
  void move(const Token& token, Copy copy) {
    std::lock_guard lock(link_->mu);
    if (!link_->open)
      throw Error(ErrorKind::kTargetIo, "RDMA loopback: session " + std::to_string(link_->session) + " is closed");
    copy(reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(token.address)));
  }

  std::shared_ptr<Link> link_;
  TokenGuard guard_;
};

class LoopbackListener : public Listener {
 public:
  LoopbackListener(std::shared_ptr<Fabric> fabric, uint16_t port, const SessionOptions& options)
      : fabric_(std::move(fabric)),
        port_(port),
        timeout_(options.timeout),
        state_(std::make_shared<ListenerState>()),
        pool_(options.slot_size, options.slot_count, nullptr, SlotPool::Access::kLocal) {
    std::lock_guard lock(fabric_->mu);
    if (port_ == 0) port_ = fabric_->next_port++;
    if (!fabric_->listeners.emplace(port_, state_).second)
      throw Error(ErrorKind::kTargetIo, "RDMA loopback: port " + std::to_string(port_) + " is in use");
  }
  ~LoopbackListener() override {
    std::lock_guard lock(fabric_->mu);
    fabric_->listeners.erase(port_);
  }

  uint16_t port() const override { return port_; }
  SlotPool& pool() override { return pool_; }

  std::unique_ptr<ServerSession> accept() override {
    std::unique_lock lock(state_->mu);
    if (!state_->arrived.wait_for(lock, timeout_, [this] { return !state_->pending.empty(); }))
      throw Error(ErrorKind::kTargetIo, "RDMA loopback: no client connected to port " + std::to_string(port_) +
                                            " within " + std::to_string(timeout_.count()) + " ms");
    auto link = std::move(state_->pending.front());
    state_->pending.pop_front();
    return std::make_unique<LoopbackServerSession>(std::move(link));
  }

 private:
  std::shared_ptr<Fabric> fabric_;
  uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<ListenerState> state_;
  SlotPool pool_;
};

class LoopbackClientSession : public ClientSession {
 public:
  LoopbackClientSession(std::shared_ptr<Fabric> fabric, uint16_t port, const SessionOptions& options)
      : fabric_(std::move(fabric)),
        port_(port),
        pool_(options.slot_size, options.slot_count, nullptr, SlotPool::Access::kRemote),
        link_(fabric_->dial(port_, region())) {}
  ~LoopbackClientSession() override { link_->close(); }

  uint64_t session_id() const override { return link_->session; }

  bool alive(std::chrono::milliseconds grace) override { return link_->stays_open(grace); }

  void reconnect() override {
    link_->close();
    link_ = fabric_->dial(port_, region());
  }

 protected:
  SlotPool& pool() override { return pool_; }

 private:
  RemoteRegion region() const { return {pool_.address(), pool_.length(), pool_.rkey()}; }

  std::shared_ptr<Fabric> fabric_;
  uint16_t port_;
  SlotPool pool_;
  std::shared_ptr<Link> link_;
};

class LoopbackTransport : public Transport {
 public:
  std::unique_ptr<Listener> listen(const Endpoint& at, const SessionOptions& options) override {
    return std::make_unique<LoopbackListener>(fabric_, at.port, options);
  }
  std::unique_ptr<ClientSession> connect(const Endpoint& server, const SessionOptions& options) override {
    return std::make_unique<LoopbackClientSession>(fabric_, server.port, options);
  }

 private:
  std::shared_ptr<Fabric> fabric_ = std::make_shared<Fabric>();
};

}  // namespace

std::unique_ptr<Transport> make_loopback_transport() { return std::make_unique<LoopbackTransport>(); }

}  // namespace keel::targets::rdma
