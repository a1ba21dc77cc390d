#include "engine/keys.h"

#include <optional>

#include "util/checksum.h"
#include "util/codec.h"
#include "util/error.h"

namespace keel::engine {
namespace {

// KEELKEY2 slots end with an XXH3-64 of everything before it, so a damaged
// slot is told apart from a wrong password (both fail the box's
// authentication). KEELKEY1 slots, without it, are still read.
constexpr std::string_view kSlotMagic = "KEELKEY2";
constexpr std::string_view kSlotMagicV1 = "KEELKEY1";
constexpr size_t kChecksumSize = 8;
constexpr size_t kSaltSize = 32;

Bytes encode_keys(const MasterKeys& keys) {
  Encoder e;
  e.raw(keys.data);
  e.raw(keys.id);
  e.raw(keys.chunker);
  return e.take();
}

}  // namespace

MasterKeys MasterKeys::generate() { return {random_key(), random_key(), random_key()}; }

Bytes seal_key_slot(const MasterKeys& keys, const KeySlotInfo& info, std::string_view password,
                    const ScryptParams& params) {
  Key256 salt = random_key();
  Key256 kek = derive_key(password, salt, params);
  Encoder e;
  e.raw(as_bytes(kSlotMagic));
  e.id(info.id);
  e.svarint(info.created_unix);
  e.str(info.host);
  e.str(info.username);
  e.varint(params.n);
  e.varint(params.r);
  e.varint(params.p);
  e.raw(salt);
  e.bytes(seal(kek, encode_keys(keys), info.id.view()));
  Bytes slot = e.take();
  Encoder checksum;
  checksum.u64(xxh3_64(slot));
  const Bytes sum = checksum.take();
  slot.insert(slot.end(), sum.begin(), sum.end());
  return slot;
}

namespace {

struct DecodedSlot {
  KeySlotInfo info;
  ScryptParams params;
  ByteView salt;
  ByteView box;
};

[[noreturn]] void damaged(const std::string& what, const std::string& why) {
  throw Error(ErrorKind::kIntegrity, what + ": the key slot is damaged (" + why +
                                         "); another password's slot may still open the repository");
}

// The slot without its checksum, once the checksum is found to match.
ByteView checked_body(ByteView slot, const std::string& what) {
  if (slot.size() < kSlotMagic.size()) damaged(what, "truncated to " + std::to_string(slot.size()) + " bytes");
  const std::string_view magic = as_chars(slot.first(kSlotMagic.size()));
  if (magic == kSlotMagicV1) return slot;
  if (magic != kSlotMagic) damaged(what, "it does not start as a keel key slot");
  if (slot.size() < kSlotMagic.size() + kChecksumSize) damaged(what, "truncated");
  const ByteView body = slot.first(slot.size() - kChecksumSize);
  Decoder sum(slot.last(kChecksumSize), what);
  if (sum.u64() != xxh3_64(body)) damaged(what, "its checksum does not match");
  return body;
}

DecodedSlot decode_slot(ByteView slot, const std::string& what) {
  Decoder d(checked_body(slot, what), what);
  d.raw(kSlotMagic.size());  // checked above
  DecodedSlot s;
  s.info.id = d.id();
  s.info.created_unix = d.svarint();
  s.info.host = d.str();
  s.info.username = d.str();
  s.params.n = d.varint();
  s.params.r = static_cast<uint32_t>(d.varint());
  s.params.p = static_cast<uint32_t>(d.varint());
  // Refuse parameters that would let a planted slot exhaust memory or time.
  if (s.params.n < 2 || s.params.n > (1u << 22) || (s.params.n & (s.params.n - 1)) || s.params.r == 0 ||
      s.params.r > 32 || s.params.p == 0 || s.params.p > 16) {
    d.fail("scrypt parameters out of range");
  }
  s.salt = d.raw(kSaltSize);
  s.box = d.bytes();
  d.expect_done();
  return s;
}

}  // namespace

KeySlotInfo read_key_slot_info(ByteView slot, const std::string& what) { return decode_slot(slot, what).info; }

std::optional<MasterKeys> open_key_slot(ByteView slot, std::string_view password, const std::string& what) {
  DecodedSlot s = decode_slot(slot, what);
  Key256 kek = derive_key(password, s.salt, s.params);
  Bytes plain;
  try {
    open_sealed(kek, s.box, s.info.id.view(), plain, what);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kIntegrity) return std::nullopt;  // another password's slot
    throw;
  }
  Decoder d(plain, what);
  MasterKeys keys;
  auto take = [&](Key256& k) {
    ByteView b = d.raw(k.size());
    std::copy(b.begin(), b.end(), k.begin());
  };
  take(keys.data);
  take(keys.id);
  take(keys.chunker);
  d.expect_done();
  return keys;
}

}  // namespace keel::engine
