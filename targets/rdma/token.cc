#include "targets/rdma/token.h"

#include <openssl/rand.h>

#include <limits>

#include "util/bytes.h"
#include "util/error.h"

namespace keel::targets::rdma {
namespace {

[[noreturn]] void reject(const std::string& why) {
  throw Error(ErrorKind::kUsage, "malformed RDMA token: " + why);
}

std::string hex_field(uint64_t value, int digits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(digits, '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) out[i] = kDigits[value & 0xf];
  return out;
}

// Exactly `digits` lowercase hex digits; upper case is refused so that one
// token has one spelling.
uint64_t parse_hex_field(std::string_view field, size_t digits, const char* name) {
  if (field.size() != digits) reject(std::string(name) + " must be " + std::to_string(digits) + " hex digits");
  uint64_t value = 0;
  for (char c : field) {
    int nibble;
    if (c >= '0' && c <= '9') nibble = c - '0';
    else if (c >= 'a' && c <= 'f') nibble = c - 'a' + 10;
    else reject(std::string(name) + " has a character that is not a lowercase hex digit");
    value = value << 4 | static_cast<uint64_t>(nibble);
  }
  return value;
}

}  // namespace

Token Token::grant(uint64_t session, uint64_t address, uint64_t length, uint32_t rkey) {
  Token t{session, address, length, rkey, {}};
  if (RAND_bytes(t.nonce.data(), static_cast<int>(t.nonce.size())) != 1)
    throw Error(ErrorKind::kFailure, "RAND_bytes failed while making an RDMA token nonce");
  return t;
}

std::string Token::encode() const {
  std::string out(kVersion);
  out += ':' + hex_field(session, 16) + ':' + hex_field(address, 16) + ':' + hex_field(length, 16) + ':' +
         hex_field(rkey, 8) + ':' + to_hex(nonce);
  return out;
}

Token Token::parse(std::string_view text) {
  if (text.size() != kEncodedSize) reject("expected " + std::to_string(kEncodedSize) + " characters, got " +
                                          std::to_string(text.size()));
  if (text.substr(0, kVersion.size()) != kVersion || text[kVersion.size()] != ':')
    reject("unknown version (this server speaks " + std::string(kVersion) + ")");
  std::string_view rest = text.substr(kVersion.size() + 1);
  auto next = [&rest](size_t digits) {
    std::string_view field = rest.substr(0, digits);
    if (rest.size() > digits && rest[digits] != ':') reject("fields must be separated by ':'");
    rest.remove_prefix(std::min(rest.size(), digits + 1));
    return field;
  };
  Token t;
  t.session = parse_hex_field(next(16), 16, "session");
  t.address = parse_hex_field(next(16), 16, "address");
  t.length = parse_hex_field(next(16), 16, "length");
  t.rkey = static_cast<uint32_t>(parse_hex_field(next(8), 8, "rkey"));
  std::string_view nonce = next(32);
  for (size_t i = 0; i < t.nonce.size(); ++i)
    t.nonce[i] = static_cast<uint8_t>(parse_hex_field(nonce.substr(2 * i, 2), 2, "nonce"));
  if (t.length == 0) reject("length is 0");
  if (t.address > std::numeric_limits<uint64_t>::max() - t.length) reject("address + length overflows");
  return t;
}

}  // namespace keel::targets::rdma
