// What `keel mount` reads from a repository, and nothing more: the snapshot
// list and trees (from the catalog) and chunks. The mount's file system
// works on this seam, so the tests can give it any repository and the
// content layer can take over the reads in one place.
#pragma once

#include <memory>
#include <vector>

#include "catalog/catalog.h"
#include "engine/tree.h"

namespace keel::engine {
class Repository;
}

namespace keel::engine::mount {

class MountSource {
 public:
  virtual ~MountSource() = default;
  virtual std::vector<catalog::SnapshotRecord> snapshots() = 0;  // oldest first
  virtual Tree tree(const Id& id) = 0;
  // A data chunk's plaintext. Called from several threads at once.
  virtual Bytes chunk(const Id& id) = 0;
};

// The repository's catalog and blob reads. `repo` must outlive it.
std::unique_ptr<MountSource> repository_source(Repository& repo);

}  // namespace keel::engine::mount
