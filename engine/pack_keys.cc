#include "engine/pack_keys.h"

#include <algorithm>

#include "engine/pack.h"
#include "util/error.h"

namespace keel::engine {
namespace {
constexpr std::string_view kPreambleMagic = "KEELPKY1";
}

PackKeys::PackKeys(targets::Target& target, const MasterKeys& keys)
    : target_(target), keys_(keys), write_key_(keys.format >= 2 ? random_key() : keys.data) {}

Bytes PackKeys::preamble(const Id& pack) const {
  if (keys_.format < 2) return {};
  Bytes out(kPreambleMagic.begin(), kPreambleMagic.end());
  seal_to(keys_.sealing.public_key, write_key_, pack.view(), out);
  return out;
}

Key256 PackKeys::blob_key(const Id& pack) {
  if (keys_.format < 2) return keys_.data;
  std::string what = "pack " + pack.hex() + " on " + target_.describe();
  if (!keys_.full()) {
    throw Error(ErrorKind::kUsage, "a put-only key cannot read the repository's data (" + what +
                                       "); use a full key");
  }
  {
    std::lock_guard lock(mu_);
    if (auto it = opened_.find(pack); it != opened_.end()) return it->second;
  }
  Bytes preamble(kPackPreambleSize);
  if (target_.get_range(pack_key(pack), 0, preamble) != preamble.size()) {
    throw Error(ErrorKind::kIntegrity, what + ": too short to hold its key preamble");
  }
  if (as_chars(ByteView(preamble).first(kPreambleMagic.size())) != kPreambleMagic) {
    // A version-1 pack, written before the repository was migrated to format
    // 2 (keel migrate): its blobs are under the data key. (A version-1 pack
    // starts with its first blob's random nonce, which matches the magic
    // with a chance of 2^-64; a damaged preamble fails each blob's
    // authentication instead.)
    std::lock_guard lock(mu_);
    opened_.emplace(pack, keys_.data);
    return keys_.data;
  }
  Bytes plain = open_sealed_to(keys_.sealing, ByteView(preamble).subspan(kPreambleMagic.size()), pack.view(),
                               what + " key preamble");
  if (plain.size() != 32) throw Error(ErrorKind::kIntegrity, what + ": key preamble holds no 32-byte key");
  Key256 key;
  std::copy(plain.begin(), plain.end(), key.begin());
  std::lock_guard lock(mu_);
  opened_.emplace(pack, key);
  return key;
}

}  // namespace keel::engine
