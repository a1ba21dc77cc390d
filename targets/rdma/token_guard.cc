#include "targets/rdma/token_guard.h"

#include <string>

#include "util/error.h"

namespace keel::targets::rdma {
namespace {

[[noreturn]] void refuse(const std::string& why) { throw Error(ErrorKind::kUsage, "RDMA token rejected: " + why); }

}  // namespace

void TokenGuard::admit(const Token& token, uint64_t local_capacity) {
  if (token.session != session_)
    refuse("it names session " + std::to_string(token.session) + ", not this connection's session " +
           std::to_string(session_));
  if (token.rkey != region_.rkey) refuse("its rkey is not the one this session registered");
  // Token::parse guarantees address + length does not overflow.
  if (token.address < region_.address || token.address + token.length > region_.address + region_.length)
    refuse("range [" + std::to_string(token.address) + ", +" + std::to_string(token.length) +
           ") lies outside the client's registered range [" + std::to_string(region_.address) + ", +" +
           std::to_string(region_.length) + ")");
  if (token.length > local_capacity)
    refuse(std::to_string(token.length) + " bytes do not fit the server's " + std::to_string(local_capacity) +
           "-byte buffer");
  std::lock_guard lock(mu_);
  if (!spent_.insert(token.nonce).second) refuse("its nonce was already used (tokens are one-use)");
}

}  // namespace keel::targets::rdma
