// The config and snapshot records as stored on a target, read without an
// open Repository: keel repair --undelete verifies old versions of them so
// (engine/undelete.h). Repository::open and Repository::read_snapshot use the same.
#pragma once

#include <optional>

#include "catalog/catalog.h"
#include "engine/keys.h"
#include "engine/repository.h"
#include "targets/target.h"

namespace keel::engine {

// The config object on `target`, opened with `keys`. A format-1 full key of
// a repository migrated to format 2 becomes its format-2 full key (read from
// keys-v2). Throws Error(kIntegrity) if it does not open, Error(kNotFound) if
// there is none.
RepoConfig read_config(targets::Target& target, MasterKeys& keys);
// Writes the config object: KEELCFG1 under the data key, or KEELCFG2 under the index key.
void write_config(targets::Target& target, const RepoConfig& config, const MasterKeys& keys);

// The snapshot record `id` on `target`, authenticated with `keys`; nullopt
// if there is none, or if it is a format-1 record (written before the
// repository was migrated to format 2) and `keys` is a put-only key, which
// cannot read it. Throws Error(kIntegrity) if it is damaged.
std::optional<catalog::SnapshotRecord> read_snapshot_object(targets::Target& target, const MasterKeys& keys,
                                                            const Id& id);

}  // namespace keel::engine
