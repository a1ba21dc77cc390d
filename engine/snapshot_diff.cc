#include "engine/snapshot_diff.h"

namespace keel::engine {

namespace {

std::string child_path(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

std::vector<std::string> metadata_changes(const NodeMeta& a, const NodeMeta& b) {
  std::vector<std::string> out;
  if (a.mode != b.mode) out.push_back("mode");
  if (a.uid != b.uid || a.gid != b.gid || a.user != b.user || a.group != b.group) out.push_back("owner");
  if (a.mtime_ns != b.mtime_ns) out.push_back("mtime");
  if (a.symlink_target != b.symlink_target) out.push_back("target");
  if (a.xattrs != b.xattrs) out.push_back("xattrs");
  if (a.rdev != b.rdev) out.push_back("device");
  return out;
}

class Differ {
 public:
  Differ(Repository& repo, const std::function<void(const FileChange&)>& fn) : repo_(repo), fn_(fn) {}

  void trees(const std::string& dir, const Id& from, const Id& to) {
    if (from == to) return;
    const Tree a = repo_.load_tree(from), b = repo_.load_tree(to);
    auto ia = a.entries.begin(), ib = b.entries.begin();
    while (ia != a.entries.end() || ib != b.entries.end()) {
      if (ib == b.entries.end() || (ia != a.entries.end() && ia->meta.name < ib->meta.name)) {
        one_side(child_path(dir, ia->meta.name), *ia, ChangeKind::kRemoved);
        ++ia;
      } else if (ia == a.entries.end() || ib->meta.name < ia->meta.name) {
        one_side(child_path(dir, ib->meta.name), *ib, ChangeKind::kAdded);
        ++ib;
      } else {
        both(child_path(dir, ia->meta.name), *ia, *ib);
        ++ia;
        ++ib;
      }
    }
  }

  DiffSummary summary;

 private:
  void report(FileChange change) {
    switch (change.kind) {
      case ChangeKind::kAdded: ++summary.added; break;
      case ChangeKind::kRemoved: ++summary.removed; break;
      case ChangeKind::kModified: ++summary.modified; break;
      case ChangeKind::kMetadata: ++summary.metadata; break;
      case ChangeKind::kType: ++summary.type; break;
    }
    if (change.size_after > change.size_before) summary.bytes_added += change.size_after - change.size_before;
    if (change.size_before > change.size_after) summary.bytes_removed += change.size_before - change.size_after;
    fn_(change);
  }

  static uint64_t file_size(const TreeEntry& e) { return e.meta.type == NodeType::kFile ? e.meta.size : 0; }

  // An entry only one snapshot has, and everything below it.
  void one_side(const std::string& path, const TreeEntry& e, ChangeKind kind) {
    FileChange change{path, kind, e.meta.type};
    (kind == ChangeKind::kAdded ? change.size_after : change.size_before) = file_size(e);
    report(std::move(change));
    if (e.meta.type != NodeType::kDir) return;
    for (const TreeEntry& child : repo_.load_tree(e.subtree).entries) one_side(child_path(path, child.meta.name), child, kind);
  }

  void both(const std::string& path, const TreeEntry& a, const TreeEntry& b) {
    if (a.meta.type != b.meta.type) {
      report(FileChange{path, ChangeKind::kType, b.meta.type, file_size(a), file_size(b), {"type"}});
      // What was below a directory is gone, or new below the new one.
      if (a.meta.type == NodeType::kDir) {
        for (const TreeEntry& c : repo_.load_tree(a.subtree).entries) one_side(child_path(path, c.meta.name), c, ChangeKind::kRemoved);
      }
      if (b.meta.type == NodeType::kDir) {
        for (const TreeEntry& c : repo_.load_tree(b.subtree).entries) one_side(child_path(path, c.meta.name), c, ChangeKind::kAdded);
      }
      return;
    }
    std::vector<std::string> metadata = metadata_changes(a.meta, b.meta);
    const bool content = a.meta.type == NodeType::kFile && (a.meta.size != b.meta.size || a.file_hash != b.file_hash);
    // A directory's mtime changes with its entries, and those are reported themselves.
    if (a.meta.type == NodeType::kDir && a.subtree != b.subtree) std::erase(metadata, "mtime");
    if (content || !metadata.empty()) {
      report(FileChange{path, content ? ChangeKind::kModified : ChangeKind::kMetadata, b.meta.type, file_size(a),
                        file_size(b), std::move(metadata)});
    }
    if (a.meta.type == NodeType::kDir) trees(path, a.subtree, b.subtree);
  }

  Repository& repo_;
  const std::function<void(const FileChange&)>& fn_;
};

}  // namespace

const char* change_kind_name(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kAdded: return "added";
    case ChangeKind::kRemoved: return "removed";
    case ChangeKind::kModified: return "modified";
    case ChangeKind::kMetadata: return "metadata";
    case ChangeKind::kType: return "type";
  }
  return "?";
}

DiffSummary diff_snapshots(Repository& repo, const catalog::SnapshotRecord& from, const catalog::SnapshotRecord& to,
                           const std::function<void(const FileChange&)>& fn) {
  Differ differ(repo, fn);
  differ.trees("/", from.root, to.root);
  return differ.summary;
}

}  // namespace keel::engine
