#include "util/bytes.h"

#include <openssl/evp.h>

#include "util/error.h"

namespace keel {

std::string to_hex(ByteView bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Bytes from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) throw Error(ErrorKind::kUsage, "hex string has odd length: " + std::string(hex));
  Bytes out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) throw Error(ErrorKind::kUsage, "not a hex string: " + std::string(hex));
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

std::string to_base64(ByteView bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Bytes from_base64(std::string_view text) {
  const auto bad = [&] { return Error(ErrorKind::kUsage, "not base64: '" + std::string(text.substr(0, 100)) + "'"); };
  if (text.size() % 4 != 0) throw bad();
  const size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
  // EVP_DecodeBlock skips leading blanks and accepts '=' anywhere; S3 does not.
  if (text.substr(0, text.size() - padding).find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") != std::string_view::npos) {
    throw bad();
  }
  Bytes out(text.size() / 4 * 3);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0 || static_cast<size_t>(n) < padding) throw bad();
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

}  // namespace keel
