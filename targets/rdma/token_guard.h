// The server's check of a token before any RDMA operation, the same for every
// transport: the token must belong to this session, lie inside the range the
// client registered when it connected (and carry its rkey), fit the server's
// buffer, and not have been used before.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <set>

#include "targets/rdma/token.h"

namespace keel::targets::rdma {

// A client's registered memory, announced when the session connects.
struct RemoteRegion {
  uint64_t address = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
};

class TokenGuard {
 public:
  TokenGuard(uint64_t session, RemoteRegion client_region) : session_(session), region_(client_region) {}

  // Throws Error(kUsage) "RDMA token rejected: ..." unless the token may move
  // its `length` bytes through a local buffer of `local_capacity` bytes;
  // accepted tokens are spent. Thread-safe.
  void admit(const Token& token, uint64_t local_capacity);

 private:
  const uint64_t session_;
  const RemoteRegion region_;
  std::mutex mu_;
  std::set<std::array<uint8_t, 16>> spent_;  // nonces; live as long as the session
};

}  // namespace keel::targets::rdma
