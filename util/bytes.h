// Byte buffers, views and hex encoding.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace keel {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;

inline ByteView as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
inline std::string_view as_chars(ByteView b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::string to_hex(ByteView bytes);
// Throws Error(kUsage) on odd length or a non-hex digit.
Bytes from_hex(std::string_view hex);

// Standard base64 (RFC 4648, with '=' padding).
std::string to_base64(ByteView bytes);
// Throws Error(kUsage) on a length that is not a multiple of 4, a character
// outside the alphabet or misplaced padding.
Bytes from_base64(std::string_view text);

}  // namespace keel
