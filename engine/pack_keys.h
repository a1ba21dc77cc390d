// Which key opens the blobs of each pack, and what a new pack carries so that
// full keys can open it later (docs/repository-format.md):
//
//   format 1  every blob is sealed under the data key (so are the blobs of
//             packs written before a repository was migrated to format 2).
//   format 2  each process seals its blobs under a random blob key of its
//             own, and every pack it writes starts with a preamble holding
//             that key sealed to the repository's public key: only full keys
//             (the private key) open a pack, not even its writer once it has
//             forgotten the key.
//
//   preamble  "KEELPKY1" || seal_to(public key, blob key, AD pack id)   (100 bytes; put-only keys)
//             "KEELPKY2" || the same || vouch (132 bytes; full keys), where
//             vouch = HMAC-SHA-256(vouch key, "keel pack preamble" || pack id || the sealed key)
//             (engine/pack_vouch.h): only full keys make or check it
//
// Blobs are sealed before the pack they land in is known (workers seal in
// parallel, one writer packs), so the key is per process, not per pack;
// the preamble is per pack so that each pack opens on its own.
//
// A blob key is *authentic* when only a full key can have sealed blobs
// under it: the data key, or a blob key whose preamble a full key vouched
// for (a put-only key can seal any blob key to the public key, but cannot
// vouch for it). Every blob is sealed with its id as associated data by a
// writer that computed that id from the plaintext, so a blob that opens
// under an authentic key is its id's content, and reads need not hash it
// again (engine/content.h). A thief cannot reuse a vouched preamble
// either: it binds the pack id, and its blob key is unknown to the thief.
#pragma once

#include <map>
#include <mutex>
#include <optional>

#include "engine/keys.h"
#include "targets/target.h"
#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

constexpr size_t kPackPreambleSize = 8 + kPublicSealOverhead + 32;       // KEELPKY1
constexpr size_t kVouchedPackPreambleSize = kPackPreambleSize + 32;     // KEELPKY2

struct BlobKey {
  Key256 key{};
  bool authentic = false;  // see above
};

class PackKeys {
 public:
  PackKeys(targets::Target& target, const MasterKeys& keys);

  const MasterKeys& keys() const { return keys_; }
  // Seals pack headers' blob tables (the index key; the data key in format 1).
  const Key256& header_key() const { return keys_.index; }
  // Seals the blobs this process writes.
  const Key256& write_key() const { return write_key_; }
  // The trailer version of new packs: 2 when they start with a preamble.
  uint32_t pack_version() const { return keys_.format >= 2 ? 2 : 1; }
  // What a new pack starts with (nothing in format 1).
  Bytes preamble(const Id& pack) const;
  // Whether a blob copied from one pack into a new one must be sealed again
  // under write_key() (format 2: each pack has its own).
  bool reseal_copies() const { return keys_.format >= 2; }

  // The key that opens the blobs of `pack`, and whether it is authentic.
  // Format 2 reads the pack's preamble once per process (a pack without
  // one was written before the repository was migrated from format 1: the
  // data key). Thread-safe. Throws Error(kUsage) for a put-only key,
  // Error(kIntegrity) if the preamble is damaged. A KEELPKY2 preamble whose
  // vouch does not check still opens the pack, as not authentic.
  BlobKey blob_key(const Id& pack);

 private:
  targets::Target& target_;
  const MasterKeys& keys_;
  Key256 write_key_;
  std::optional<Key256> vouch_key_;  // full keys of format 2
  std::mutex mu_;
  std::map<Id, BlobKey> opened_;
};

}  // namespace keel::engine
