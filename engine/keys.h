// Master keys and the password key slots that wrap them. Master keys are
// random and never change; a key slot seals them under a key derived from a
// password with scrypt, so passwords can be added and removed freely.
//
// Format 1 repositories have one kind of key: the data key seals everything.
// Format 2 splits what writing needs from what reading needs
// (docs/repository-format.md, "Put-only keys"): a put-only key holds the id,
// chunker and index keys and the repository's public key, not the data key
// nor the private key, so it can write snapshots but read nothing back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/crypto.h"
#include "engine/public_seal.h"
#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

enum class KeyKind : uint8_t { kFull = 0, kPutOnly = 1 };

std::string_view key_kind_name(KeyKind kind);  // "full", "put-only"

struct MasterKeys {
  uint32_t format = 1;  // the repository format the keys belong to
  KeyKind kind = KeyKind::kFull;
  Key256 data{};     // format 1: seals everything; format 2: catalog copies. Full keys only.
  Key256 id{};       // keys the HMAC that names chunks and trees
  Key256 chunker{};  // seeds the chunker's gear table
  // Seals what every writer must read: config, pack blob tables, leases,
  // condemnations, the change log, snapshot headers. Format 1: the data key.
  Key256 index{};
  // Format 2: blob keys and snapshot records are sealed to the public half;
  // only full keys hold the private half.
  SealingKeyPair sealing{};

  static MasterKeys generate(uint32_t format = 1);
  // The put-only key of the same format-2 repository.
  MasterKeys put_only() const;
  // The format-2 full keys of a format-1 repository being migrated (keel
  // migrate): its data, id and chunker keys, a new index key and key pair.
  MasterKeys migrated() const;
  bool full() const { return kind == KeyKind::kFull; }
};

// A format-1 repository migrated to format 2 keeps its format-1 key slots,
// which cannot be rewritten without their passwords; what format 2 adds (the
// index key, the private key) is sealed under the data key in this object:
// "KEELMIG2" + box(data key, AD "keel keys v2") of index key || private key.
inline constexpr std::string_view kMigratedKeysKey = "keys-v2";

Bytes seal_migrated_keys(const MasterKeys& keys);  // `keys`: format-2 full keys
// The format-2 full keys of the full key `keys` (either format: its data, id
// and chunker keys are kept) from a keys-v2 object. Throws Error(kIntegrity)
// naming `what` if it does not open.
MasterKeys open_migrated_keys(const MasterKeys& keys, ByteView object, const std::string& what);

struct KeySlotInfo {
  Id id;
  int64_t created_unix = 0;
  std::string host;
  std::string username;
  KeyKind kind = KeyKind::kFull;
};

// Seals `keys` under `password`; returns the encoded slot for keys/<info.id>
// ("KEELKEY2" for format 1, "KEELKEY3" with the key's kind for format 2).
Bytes seal_key_slot(const MasterKeys& keys, const KeySlotInfo& info, std::string_view password,
                    const ScryptParams& params = {});
// Reads a slot's public part (who added it, when, its kind) without the password.
KeySlotInfo read_key_slot_info(ByteView slot, const std::string& what);
// Returns the master keys if `password` opens the slot, nothing otherwise.
// Throws Error(kIntegrity) if the slot is malformed.
std::optional<MasterKeys> open_key_slot(ByteView slot, std::string_view password, const std::string& what);

}  // namespace keel::engine
