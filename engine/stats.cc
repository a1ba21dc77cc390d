#include "engine/stats.h"

#include <cstring>
#include <unordered_set>

namespace keel::engine {

namespace {

struct IdHash {
  size_t operator()(const Id& id) const {
    size_t h;
    std::memcpy(&h, id.view().data(), sizeof h);  // ids are random or hashes: any 8 bytes spread well
    return h;
  }
};

class Counter {
 public:
  explicit Counter(Repository& repo) : repo_(repo) {}

  void add(const catalog::SnapshotRecord& snapshot) {
    ++stats_.snapshots;
    std::vector<Id> trees{snapshot.root};
    // Trees are walked in full for each snapshot: a file counts once per
    // occurrence in the restore size; blobs count once across all.
    while (!trees.empty()) {
      Id id = trees.back();
      trees.pop_back();
      blob(id);
      for (const TreeEntry& e : repo_.load_tree(id).entries) {
        if (e.meta.type == NodeType::kDir) {
          trees.push_back(e.subtree);
        } else if (e.meta.type == NodeType::kFile) {
          ++stats_.files;
          stats_.restore_bytes += e.meta.size;
          for (const ContentRef& ref : e.content) {
            if (!ref.hole) blob(ref.chunk);
          }
        }
      }
    }
  }

  SpaceStats finish() {
    std::vector<Id> ids(pending_.begin(), pending_.end());
    std::vector<std::optional<catalog::BlobLocation>> found = repo_.catalog().find_blobs(ids);
    for (const auto& location : found) {
      if (!location) {
        ++stats_.missing_blobs;
        continue;
      }
      stats_.raw_bytes += location->blob.raw_length;
      stats_.stored_bytes += location->blob.stored_length;
    }
    stats_.blobs = ids.size();
    return stats_;
  }

 private:
  void blob(const Id& id) { pending_.insert(id); }

  Repository& repo_;
  SpaceStats stats_;
  std::unordered_set<Id, IdHash> pending_;
};

}  // namespace

double SpaceStats::dedup_ratio() const { return raw_bytes ? static_cast<double>(restore_bytes) / raw_bytes : 0; }
double SpaceStats::compression_ratio() const { return stored_bytes ? static_cast<double>(raw_bytes) / stored_bytes : 0; }

SpaceStats snapshot_stats(Repository& repo, const catalog::SnapshotRecord& snapshot) {
  return combined_stats(repo, {snapshot});
}

SpaceStats combined_stats(Repository& repo, const std::vector<catalog::SnapshotRecord>& snapshots) {
  Counter counter(repo);
  for (const catalog::SnapshotRecord& s : snapshots) counter.add(s);
  return counter.finish();
}

}  // namespace keel::engine
