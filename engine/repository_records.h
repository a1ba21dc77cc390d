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

// The config object on `target`, opened with `keys`. Throws Error(kIntegrity)
// if it does not open, Error(kNotFound) if there is none.
RepoConfig read_config(targets::Target& target, const MasterKeys& keys);

// The snapshot record `id` on `target`, authenticated with `keys`; nullopt
// if there is none. Throws Error(kIntegrity) if it is damaged.
std::optional<catalog::SnapshotRecord> read_snapshot_object(targets::Target& target, const MasterKeys& keys,
                                                            const Id& id);

}  // namespace keel::engine
