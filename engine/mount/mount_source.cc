#include "engine/mount/mount_source.h"

#include "engine/repository.h"

namespace keel::engine::mount {

namespace {

class RepositorySource : public MountSource {
 public:
  explicit RepositorySource(Repository& repo) : repo_(repo) {}

  std::vector<catalog::SnapshotRecord> snapshots() override { return repo_.catalog().list_snapshots(); }
  Tree tree(const Id& id) override { return repo_.load_tree(id); }
  // The one read of file content: located through the catalog, checked and
  // opened by the repository.
  Bytes chunk(const Id& id) override { return repo_.read_blob(id); }

 private:
  Repository& repo_;
};

}  // namespace

std::unique_ptr<MountSource> repository_source(Repository& repo) { return std::make_unique<RepositorySource>(repo); }

}  // namespace keel::engine::mount
