#include "engine/pack_keys.h"

#include <algorithm>

#include "engine/pack.h"
#include "engine/pack_vouch.h"
#include "util/codec.h"
#include "util/text.h"
#include "util/error.h"

namespace keel::engine {
namespace {

constexpr std::string_view kPreambleMagic = "KEELPKY1";
constexpr std::string_view kVouchedPreambleMagic = "KEELPKY2";

Id preamble_vouch(const Key256& vouch_key, const Id& pack, ByteView sealed_key) {
  Encoder e;
  e.str("keel pack preamble");
  e.id(pack);
  e.bytes(sealed_key);
  return keyed_id(vouch_key, e.take());
}

}  // namespace

PackKeys::PackKeys(targets::Target& target, const MasterKeys& keys)
    : target_(target), keys_(keys), write_key_(keys.format >= 2 ? random_key() : keys.data) {
  if (keys.format >= 2 && keys.full()) vouch_key_ = vouch_key(keys.data);
}

Bytes PackKeys::preamble(const Id& pack) const {
  if (keys_.format < 2) return {};
  Bytes out(vouch_key_ ? kVouchedPreambleMagic.begin() : kPreambleMagic.begin(),
            vouch_key_ ? kVouchedPreambleMagic.end() : kPreambleMagic.end());
  seal_to(keys_.sealing.public_key, write_key_, pack.view(), out);
  if (vouch_key_) {
    const Id vouch = preamble_vouch(*vouch_key_, pack, ByteView(out).subspan(kPreambleMagic.size()));
    out.insert(out.end(), vouch.view().begin(), vouch.view().end());
  }
  return out;
}

BlobKey PackKeys::blob_key(const Id& pack) {
  if (keys_.format < 2) return {keys_.data, true};
  std::string what = "pack " + pack.hex() + " on " + target_.describe();
  if (!keys_.full()) {
    throw Error(ErrorKind::kUsage, "a put-only key cannot read the repository's data (" + what +
                                       "); use a full key");
  }
  {
    std::lock_guard lock(mu_);
    if (auto it = opened_.find(pack); it != opened_.end()) return it->second;
  }
  Bytes preamble(kVouchedPackPreambleSize);
  // A KEELPKY1 pack may be shorter than the longer preamble only if it is
  // damaged (a trailer follows its blobs), so a short read is judged below.
  preamble.resize(target_.get_range(pack_key(pack), 0, preamble));
  if (preamble.size() < kPackPreambleSize) {
    throw Error(ErrorKind::kIntegrity, what + ": too short to hold its key preamble");
  }
  const std::string_view magic = as_chars(ByteView(preamble).first(kPreambleMagic.size()));
  BlobKey out;
  if (magic == kPreambleMagic || magic == kVouchedPreambleMagic) {
    const ByteView sealed = ByteView(preamble).subspan(kPreambleMagic.size(), kPackPreambleSize - kPreambleMagic.size());
    Bytes plain = open_sealed_to(keys_.sealing, sealed, pack.view(), what + " key preamble");
    if (plain.size() != 32) throw Error(ErrorKind::kIntegrity, what + ": key preamble holds no 32-byte key");
    std::copy(plain.begin(), plain.end(), out.key.begin());
    if (magic == kVouchedPreambleMagic && preamble.size() == kVouchedPackPreambleSize) {
      const Id vouch = preamble_vouch(*vouch_key_, pack, sealed);
      const ByteView claimed = ByteView(preamble).subspan(kPackPreambleSize);
      out.authentic = constant_time_equal(as_chars(vouch.view()), as_chars(claimed));
    }
  } else {
    // A version-1 pack, written before the repository was migrated to format
    // 2 (keel migrate): its blobs are under the data key. (A version-1 pack
    // starts with its first blob's random nonce, which matches a magic
    // with a chance of 2^-63; a damaged preamble fails each blob's
    // authentication instead.)
    out = {keys_.data, true};
  }
  std::lock_guard lock(mu_);
  opened_.emplace(pack, out);
  return out;
}

}  // namespace keel::engine
