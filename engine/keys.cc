#include "engine/keys.h"

#include <optional>

#include "engine/sealed_object.h"
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
// Format 2: the slot names the key's kind, which its box is bound to.
constexpr std::string_view kSlotMagicV3 = "KEELKEY3";
constexpr size_t kChecksumSize = 8;
constexpr std::string_view kMigratedKeysMagic = "KEELMIG2";
constexpr std::string_view kMigratedKeysAad = "keel keys v2";
constexpr size_t kSaltSize = 32;

// Format 1: data, id, chunker. Format 2, full: data, id, chunker, index,
// private key; put-only: id, chunker, index, public key.
Bytes encode_keys(const MasterKeys& keys) {
  Encoder e;
  if (keys.full()) e.raw(keys.data);
  e.raw(keys.id);
  e.raw(keys.chunker);
  if (keys.format >= 2) {
    e.raw(keys.index);
    e.raw(keys.full() ? keys.sealing.private_key : keys.sealing.public_key);
  }
  return e.take();
}

// What the slot's box is bound to: its id, and in format 2 the key's kind.
Bytes slot_associated(const KeySlotInfo& info, bool versioned) {
  Bytes ad(info.id.view().begin(), info.id.view().end());
  if (versioned) ad.push_back(static_cast<uint8_t>(info.kind));
  return ad;
}

}  // namespace

std::string_view key_kind_name(KeyKind kind) { return kind == KeyKind::kPutOnly ? "put-only" : "full"; }

MasterKeys MasterKeys::generate(uint32_t format) {
  MasterKeys keys;
  keys.format = format;
  keys.data = random_key();
  keys.id = random_key();
  keys.chunker = random_key();
  if (format >= 2) {
    keys.index = random_key();
    keys.sealing = SealingKeyPair::generate();
  } else {
    keys.index = keys.data;
  }
  return keys;
}

MasterKeys MasterKeys::put_only() const {
  if (format < 2) throw Error(ErrorKind::kUsage, "put-only keys need repository format 2");
  MasterKeys keys = *this;
  keys.kind = KeyKind::kPutOnly;
  keys.data = Key256{};
  keys.sealing.private_key = Key256{};
  return keys;
}

MasterKeys MasterKeys::migrated() const {
  if (format >= 2 || !full()) throw Error(ErrorKind::kUsage, "only a format-1 full key is migrated");
  MasterKeys keys = *this;
  keys.format = 2;
  keys.index = random_key();
  keys.sealing = SealingKeyPair::generate();
  return keys;
}

Bytes seal_migrated_keys(const MasterKeys& keys) {
  Encoder e;
  e.raw(keys.index);
  e.raw(keys.sealing.private_key);
  return seal_object(kMigratedKeysMagic, keys.data, e.take(), as_bytes(kMigratedKeysAad));
}

MasterKeys open_migrated_keys(const MasterKeys& keys, ByteView object, const std::string& what) {
  if (!keys.full()) throw Error(ErrorKind::kUsage, what + ": only a full key opens it");
  Bytes plain = open_object(kMigratedKeysMagic, "migrated key set", keys.data, object, as_bytes(kMigratedKeysAad), what);
  Decoder d(plain, what);
  MasterKeys out = keys;
  out.format = 2;
  ByteView index = d.raw(out.index.size());
  std::copy(index.begin(), index.end(), out.index.begin());
  Key256 private_key;
  ByteView priv = d.raw(private_key.size());
  std::copy(priv.begin(), priv.end(), private_key.begin());
  d.expect_done();
  out.sealing = SealingKeyPair::from_private(private_key);
  return out;
}

Bytes seal_key_slot(const MasterKeys& keys, const KeySlotInfo& info, std::string_view password,
                    const ScryptParams& params) {
  Key256 salt = random_key();
  Key256 kek = derive_key(password, salt, params);
  const bool versioned = keys.format >= 2;
  KeySlotInfo slot_info = info;
  slot_info.kind = keys.kind;
  Encoder e;
  e.raw(as_bytes(versioned ? kSlotMagicV3 : kSlotMagic));
  e.id(info.id);
  if (versioned) e.u8(static_cast<uint8_t>(keys.kind));
  e.svarint(info.created_unix);
  e.str(info.host);
  e.str(info.username);
  e.varint(params.n);
  e.varint(params.r);
  e.varint(params.p);
  e.raw(salt);
  e.bytes(seal(kek, encode_keys(keys), slot_associated(slot_info, versioned)));
  Bytes slot = e.take();
  Encoder checksum;
  checksum.u64(xxh3_64(slot));
  const Bytes sum = checksum.take();
  slot.insert(slot.end(), sum.begin(), sum.end());
  return slot;
}

namespace {

struct DecodedSlot {
  bool versioned = false;  // KEELKEY3
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
  if (magic != kSlotMagic && magic != kSlotMagicV3) damaged(what, "it does not start as a keel key slot");
  if (slot.size() < kSlotMagic.size() + kChecksumSize) damaged(what, "truncated");
  const ByteView body = slot.first(slot.size() - kChecksumSize);
  Decoder sum(slot.last(kChecksumSize), what);
  if (sum.u64() != xxh3_64(body)) damaged(what, "its checksum does not match");
  return body;
}

DecodedSlot decode_slot(ByteView slot, const std::string& what) {
  Decoder d(checked_body(slot, what), what);
  DecodedSlot s;
  s.versioned = as_chars(d.raw(kSlotMagic.size())) == kSlotMagicV3;  // the magic was checked above
  s.info.id = d.id();
  if (s.versioned) {
    uint8_t kind = d.u8();
    if (kind > static_cast<uint8_t>(KeyKind::kPutOnly)) d.fail("unknown key kind " + std::to_string(kind));
    s.info.kind = static_cast<KeyKind>(kind);
  }
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
    open_sealed(kek, s.box, slot_associated(s.info, s.versioned), plain, what);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kIntegrity) return std::nullopt;  // another password's slot
    throw;
  }
  Decoder d(plain, what);
  MasterKeys keys;
  keys.format = s.versioned ? 2 : 1;
  keys.kind = s.info.kind;
  auto take = [&](Key256& k) {
    ByteView b = d.raw(k.size());
    std::copy(b.begin(), b.end(), k.begin());
  };
  if (keys.full()) take(keys.data);
  take(keys.id);
  take(keys.chunker);
  if (!s.versioned) {
    keys.index = keys.data;
  } else {
    take(keys.index);
    Key256 sealing;
    take(sealing);
    if (keys.full()) {
      keys.sealing = SealingKeyPair::from_private(sealing);
    } else {
      keys.sealing.public_key = sealing;
    }
  }
  d.expect_done();
  return keys;
}

}  // namespace keel::engine
