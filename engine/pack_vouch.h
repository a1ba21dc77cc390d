// Vouching for packs (format 2): which packs a full key's backup may dedupe
// against. A put-only or stolen put-only key can write a pack of garbage
// under the id of a chunk no one has stored yet; a backup that later
// deduplicated against it would reference a chunk no read can return. So
// every pack a full key writes carries, in its sealed header and in the
// change-log entry that names it, a vouch that only full keys can make or
// check:
//
//   vouch key = HMAC-SHA-256(data key, "keel pack vouch key")
//   vouch     = HMAC-SHA-256(vouch key, "keel pack vouch" || pack id || its blob records sorted by offset)
//
// A relocation (a blob of a deleted pack that lives on in another) carries
// the vouch of that one record in its pack. Full keys dedupe only against
// blobs in vouched packs (catalog::PackRecord::vouched); a chunk held only
// in other packs is stored again. Format 1 has full keys only: everything
// is vouched for. docs/repository-format.md, "Vouched packs".
#pragma once

#include <optional>
#include <span>

#include "catalog/pack_index.h"
#include "engine/keys.h"
#include "util/id.h"

namespace keel::engine {

// HMAC-SHA-256(data key, "keel pack vouch key"): what full keys vouch with
// (also for pack preambles, engine/pack_keys.h).
Key256 vouch_key(const Key256& data_key);

// The vouch a writer holding `keys` puts on a pack with these blobs: only
// full keys of format 2 make one.
std::optional<Id> pack_vouch(const MasterKeys& keys, const Id& pack, std::span<const catalog::BlobRecord> blobs);

// Whether a full key of the repository wrote this pack with these blobs, as
// far as `keys` can tell: true in format 1; for a format-2 full key, whether
// `vouch` is the pack's; false for a put-only key, which cannot tell.
bool pack_vouched(const MasterKeys& keys, const Id& pack, std::span<const catalog::BlobRecord> blobs,
                  const std::optional<Id>& vouch);

}  // namespace keel::engine
