// Reading a blob as the blob its id names. A copy in a pack may be false:
// a put-only or stolen key can write a pack of garbage under real blob ids,
// sealed under its own blob key, so it authenticates. Where a false copy
// would do harm — prune deleting the good one, a tree stopping prune's
// marking or a restore — the plaintext is checked against its keyed id.
#pragma once

#include <optional>
#include <string>

#include "catalog/pack_index.h"
#include "engine/repository.h"
#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

// Why the copy at `copy` is not the blob its id names (damaged, gone, or
// false); nullopt when it is.
std::optional<std::string> copy_is_not_blob(Repository& repo, const catalog::BlobLocation& copy);

// The blob from the copy Repository::read_blob reads if it hashes to its
// id, else from the first other indexed copy that does (found by listing
// every pack's blobs: only after the preferred copy failed). Throws
// Error(kIntegrity) naming every copy if none does.
Bytes read_verified_blob(Repository& repo, const Id& id);

}  // namespace keel::engine
