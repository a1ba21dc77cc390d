// The seam between keel's RDMA data plane and the fabric that carries it.
// A client session lends registered slots to the server by granting tokens;
// the server session moves bytes one-sidedly between its own slots and the
// ranges those tokens name, after TokenGuard has admitted them. Providers:
// verbs RC over rdma_cm (verbs_transport.h) and an in-process loopback
// (loopback_transport.h) for unit tests; a cuObject DC provider would be a third.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "targets/rdma/slot_pool.h"
#include "targets/rdma/token.h"

namespace keel::targets::rdma {

struct Endpoint {
  std::string host;  // an address on the RDMA device's netdev (IPv4 or IPv6)
  uint16_t port = 0;
  // "169.254.77.1:7471", "[fe80::1]:7471"; throws Error(kUsage) for anything else.
  static Endpoint parse(const std::string& text);
};

struct SessionOptions {
  size_t slot_size = 8 << 20;  // the largest single transfer
  size_t slot_count = 4;
  std::chrono::milliseconds timeout{5000};  // connect, accept and each operation
};

// The client's end of one session (one connection, reused for every request).
class ClientSession {
 public:
  virtual ~ClientSession() = default;
  virtual uint64_t session_id() const = 0;  // changes on reconnect
  // A slot from the session's registered pool; blocks until one is free.
  Slot acquire() { return pool().get(); }
  // A one-use token for the first `length` bytes of `slot`, which must come
  // from acquire(). Throws Error(kUsage) otherwise.
  Token grant(const Slot& slot, uint64_t length);
  // False once the server has gone or the connection broke (waits up to `grace`
  // for the news).
  virtual bool alive(std::chrono::milliseconds grace) = 0;
  // A fresh connection (new session id) after a broken one. Slots stay valid.
  virtual void reconnect() = 0;

 protected:
  virtual SlotPool& pool() = 0;
};

// The server's end of one client session.
class ServerSession {
 public:
  virtual ~ServerSession() = default;
  virtual uint64_t session_id() const = 0;
  // RDMA READ: the token's bytes from the client into the start of `into`.
  virtual void read(const Token& token, const Slot& into) = 0;
  // RDMA WRITE: the first token.length bytes of `from` into the client's range.
  virtual void write(const Token& token, const Slot& from) = 0;
  // False once the client has gone (its process ended, the connection broke)
  // or an operation failed; waits up to `grace` for the news.
  virtual bool alive(std::chrono::milliseconds grace) = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual uint16_t port() const = 0;
  // The next client's session; throws Error(kTargetIo) after the timeout.
  virtual std::unique_ptr<ServerSession> accept() = 0;
  // The server's registered slots, shared by its sessions.
  virtual SlotPool& pool() = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::unique_ptr<Listener> listen(const Endpoint& at, const SessionOptions& options) = 0;
  virtual std::unique_ptr<ClientSession> connect(const Endpoint& server, const SessionOptions& options) = 0;
};

}  // namespace keel::targets::rdma
