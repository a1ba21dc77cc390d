#include "util/id.h"

#include <openssl/rand.h>

#include <algorithm>

#include "util/error.h"

namespace keel {

Id Id::random() {
  Id id;
  if (RAND_bytes(id.bytes.data(), kSize) != 1) throw Error(ErrorKind::kFailure, "RAND_bytes failed");
  return id;
}

Id Id::from_hex(std::string_view hex) {
  if (hex.size() != 2 * kSize) throw Error(ErrorKind::kUsage, "not a 64-digit id: " + std::string(hex));
  return from_bytes(keel::from_hex(hex));
}

Id Id::from_bytes(ByteView b) {
  if (b.size() != kSize) throw Error(ErrorKind::kIntegrity, "id has " + std::to_string(b.size()) + " bytes, want 32");
  Id id;
  std::copy(b.begin(), b.end(), id.bytes.begin());
  return id;
}

bool Id::is_zero() const {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace keel
