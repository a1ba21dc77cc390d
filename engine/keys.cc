#include "engine/keys.h"

#include <optional>

#include "util/codec.h"
#include "util/error.h"

namespace keel::engine {
namespace {

constexpr std::string_view kSlotMagic = "KEELKEY1";
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
  return e.take();
}

namespace {

struct DecodedSlot {
  KeySlotInfo info;
  ScryptParams params;
  ByteView salt;
  ByteView box;
};

DecodedSlot decode_slot(ByteView slot, const std::string& what) {
  Decoder d(slot, what);
  if (as_chars(d.raw(kSlotMagic.size())) != kSlotMagic) d.fail("not a keel key slot");
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
