// Master keys and the password key slots that wrap them. Master keys are
// random and never change; a key slot seals them under a key derived from a
// password with scrypt, so passwords can be added and removed freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/crypto.h"
#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

struct MasterKeys {
  Key256 data;     // seals blobs, pack headers, snapshots, config
  Key256 id;       // keys the HMAC that names chunks and trees
  Key256 chunker;  // seeds the chunker's gear table

  static MasterKeys generate();
};

struct KeySlotInfo {
  Id id;
  int64_t created_unix = 0;
  std::string host;
  std::string username;
};

// Seals `keys` under `password`; returns the encoded slot for keys/<info.id>.
Bytes seal_key_slot(const MasterKeys& keys, const KeySlotInfo& info, std::string_view password,
                    const ScryptParams& params = {});
// Reads a slot's public part (who added it, when) without the password.
KeySlotInfo read_key_slot_info(ByteView slot, const std::string& what);
// Returns the master keys if `password` opens the slot, nothing otherwise.
// Throws Error(kIntegrity) if the slot is malformed.
std::optional<MasterKeys> open_key_slot(ByteView slot, std::string_view password, const std::string& what);

}  // namespace keel::engine
