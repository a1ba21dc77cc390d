#include "engine/snapshot_tags.h"

#include <algorithm>

#include "engine/object_lock.h"

namespace keel::engine {

std::vector<std::string> changed_tags(const std::vector<std::string>& tags, const TagChange& change) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& tag) {
    if (!tag.empty() && std::find(out.begin(), out.end(), tag) == out.end()) out.push_back(tag);
  };
  for (const std::string& tag : change.set ? *change.set : tags) add(tag);
  for (const std::string& tag : change.add) add(tag);
  std::erase_if(out, [&](const std::string& tag) {
    return std::find(change.remove.begin(), change.remove.end(), tag) != change.remove.end();
  });
  return out;
}

catalog::SnapshotRecord retag_snapshot(Repository& repo, const catalog::SnapshotRecord& snapshot, const TagChange& change) {
  catalog::SnapshotRecord retagged = snapshot;
  retagged.tags = changed_tags(snapshot.tags, change);
  if (retagged.tags == snapshot.tags) return snapshot;
  refuse_if_snapshot_locked(repo, snapshot);  // its old record could not be removed
  retagged.id = Id::random();
  repo.save_snapshot(retagged);  // the new record first: a crash leaves both, never neither
  repo.target().remove(snapshot_key(snapshot.id));
  repo.catalog().remove_snapshot(snapshot.id);
  ChangeLogEntry removed;
  removed.snapshots_removed.push_back(snapshot.id);
  repo.log_changes(removed);
  return retagged;
}

}  // namespace keel::engine
