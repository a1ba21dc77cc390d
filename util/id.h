// A 256-bit identifier: chunk and tree ids (keyed hashes), pack, snapshot and
// key-slot ids (random). Printed as 64 lowercase hex digits.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

#include "util/bytes.h"

namespace keel {

struct Id {
  static constexpr size_t kSize = 32;
  std::array<uint8_t, kSize> bytes{};

  static Id random();
  // Throws Error(kUsage) unless `hex` is exactly 64 hex digits.
  static Id from_hex(std::string_view hex);
  static Id from_bytes(ByteView b);  // b.size() must be kSize

  std::string hex() const { return to_hex(bytes); }
  std::string short_hex() const { return hex().substr(0, 8); }
  ByteView view() const { return bytes; }
  bool is_zero() const;

  auto operator<=>(const Id&) const = default;
};

struct IdHash {
  size_t operator()(const Id& id) const {
    size_t h;  // ids are uniformly random already
    std::memcpy(&h, id.bytes.data(), sizeof h);
    return h;
  }
};

}  // namespace keel
