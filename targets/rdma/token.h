// The RDMA token a client puts in the signed `x-amz-rdma-token` header: it
// names the client's session and the registered range the server may read
// from (PutObject, UploadPart) or write into (GetObject), once.
// Text format (docs/rdma.md), fixed length, lowercase hex:
//   keel-rc-1:<session 16>:<address 16>:<length 16>:<rkey 8>:<nonce 32>
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace keel::targets::rdma {

struct Token {
  static constexpr std::string_view kVersion = "keel-rc-1";
  static constexpr size_t kEncodedSize = kVersion.size() + 1 + 16 + 1 + 16 + 1 + 16 + 1 + 8 + 1 + 32;

  uint64_t session = 0;  // assigned by the server when the session connected
  uint64_t address = 0;  // start of the range in the client's address space
  uint64_t length = 0;   // bytes; never 0
  uint32_t rkey = 0;     // remote key of the client's registered pool
  std::array<uint8_t, 16> nonce{};  // random; the server accepts it once

  // A token for [address, address + length) with a fresh random nonce.
  static Token grant(uint64_t session, uint64_t address, uint64_t length, uint32_t rkey);

  std::string encode() const;
  // Strict: exact version, field count and widths, lowercase hex, length > 0
  // and address + length without overflow. Throws Error(kUsage) naming the fault.
  static Token parse(std::string_view text);

  bool operator==(const Token&) const = default;
};

}  // namespace keel::targets::rdma
