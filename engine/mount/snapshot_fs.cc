#include "engine/mount/snapshot_fs.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <thread>

#include "util/error.h"

namespace keel::engine::mount {

namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

std::vector<std::string_view> split(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (at < path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > at) parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return parts;
}

// "2026-11-26T03:52:20Z": sorts as time does, and has no spaces to quote.
std::string time_name(int64_t time_ns) {
  time_t secs = static_cast<time_t>(time_ns / kNsPerSecond);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A host or tag as one path component.
std::string component(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '/', '_');
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

uint32_t mode_type(NodeType type) {
  switch (type) {
    case NodeType::kFile: return S_IFREG;
    case NodeType::kDir: return S_IFDIR;
    case NodeType::kSymlink: return S_IFLNK;
    case NodeType::kFifo: return S_IFIFO;
    case NodeType::kCharDevice: return S_IFCHR;
    case NodeType::kBlockDevice: return S_IFBLK;
    case NodeType::kSocket: return S_IFSOCK;
  }
  return S_IFREG;
}

struct timespec to_timespec(int64_t ns) {
  int64_t secs = ns / kNsPerSecond, rest = ns % kNsPerSecond;
  if (rest < 0) {
    rest += kNsPerSecond;
    --secs;
  }
  return {static_cast<time_t>(secs), static_cast<long>(rest)};
}

size_t default_fetchers() { return std::max<size_t>(4, 2 * std::thread::hardware_concurrency()); }

// Which synthetic level a path names: /hosts/<host>/... and /tags/<tag>/... alike.
const std::map<std::string, std::vector<size_t>, std::less<>>* group_of(const SnapshotIndex& index,
                                                                       std::string_view top) {
  if (top == "hosts") return &index.by_host;
  if (top == "tags") return &index.by_tag;
  return nullptr;
}

}  // namespace

SnapshotIndex::SnapshotIndex(std::vector<catalog::SnapshotRecord> records) : snapshots(std::move(records)) {
  std::stable_sort(snapshots.begin(), snapshots.end(),
                   [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  std::map<std::string, size_t> per_second;
  for (const auto& s : snapshots) ++per_second[time_name(s.time_ns)];
  for (size_t i = 0; i < snapshots.size(); ++i) {
    const catalog::SnapshotRecord& s = snapshots[i];
    std::string name = time_name(s.time_ns);
    // Two in one second: each gets its id, so a name never changes meaning.
    if (per_second[name] > 1) name += "-" + s.id.short_hex();
    names.push_back(name);
    by_name.emplace(name, i);
    by_short_id.emplace(s.id.short_hex(), i);
    by_host[component(s.host)].push_back(i);
    for (const std::string& tag : s.tags) {
      if (!tag.empty()) by_tag[component(tag)].push_back(i);
    }
  }
}

uint64_t tree_weight(const Tree& tree) {
  uint64_t weight = sizeof(Tree);
  for (const TreeEntry& e : tree.entries) {
    weight += sizeof(TreeEntry) + e.meta.name.size() + e.meta.symlink_target.size() +
              e.content.size() * sizeof(ContentRef);
    for (const Xattr& x : e.meta.xattrs) weight += sizeof(Xattr) + x.name.size() + x.value.size();
  }
  return weight;
}

SnapshotFs::SnapshotFs(MountSource& source, MountOptions options)
    : source_(source),
      options_(options),
      trees_(options.tree_cache_bytes),
      cache_([&source](const Id& id) { return source.chunk(id); }, options.cache_bytes,
             options.fetchers ? options.fetchers : default_fetchers(),
             options.fetchers ? options.fetchers : default_fetchers()) {}

std::shared_ptr<const SnapshotIndex> SnapshotFs::index() {
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (!index_ || now - index_loaded_ >= options_.refresh) {
    index_ = std::make_shared<const SnapshotIndex>(source_.snapshots());
    index_loaded_ = now;
  }
  return index_;
}

std::shared_ptr<const Tree> SnapshotFs::tree(const Id& id) {
  {
    std::lock_guard lock(mu_);
    if (auto cached = trees_.get(id)) return cached;
  }
  // Loaded unlocked: two threads may both load one tree, which is harmless.
  auto loaded = std::make_shared<const Tree>(source_.tree(id));
  std::lock_guard lock(mu_);
  trees_.put(id, loaded, tree_weight(*loaded));
  return loaded;
}

std::shared_ptr<TreeEntry> SnapshotFs::directory(std::string name, int64_t mtime_ns) const {
  auto e = std::make_shared<TreeEntry>();
  e->meta.name = std::move(name);
  e->meta.type = NodeType::kDir;
  e->meta.mode = 0555;
  e->meta.uid = options_.uid;
  e->meta.gid = options_.gid;
  e->meta.mtime_ns = e->meta.ctime_ns = mtime_ns;
  e->meta.nlink = 2;
  return e;
}

std::shared_ptr<TreeEntry> SnapshotFs::symlink(std::string name, std::string target, int64_t mtime_ns) const {
  auto e = std::make_shared<TreeEntry>();
  e->meta.name = std::move(name);
  e->meta.type = NodeType::kSymlink;
  e->meta.mode = 0777;
  e->meta.uid = options_.uid;
  e->meta.gid = options_.gid;
  e->meta.mtime_ns = e->meta.ctime_ns = mtime_ns;
  e->meta.size = target.size();
  e->meta.symlink_target = std::move(target);
  return e;
}

std::shared_ptr<const TreeEntry> SnapshotFs::snapshot_root(const SnapshotIndex& index, size_t i) const {
  std::shared_ptr<TreeEntry> e = directory(index.names[i], index.snapshots[i].time_ns);
  e->subtree = index.snapshots[i].root;
  return e;
}

std::shared_ptr<const TreeEntry> SnapshotFs::resolve(std::string_view path) { return resolve_in(*index(), split(path)); }

std::shared_ptr<const TreeEntry> SnapshotFs::resolve_in(const SnapshotIndex& index,
                                                        const std::vector<std::string_view>& parts) {
  int64_t newest = index.snapshots.empty() ? 0 : index.snapshots.back().time_ns;
  if (parts.empty()) return directory("", newest);
  std::string_view top = parts[0];
  if (top == "ids") {
    if (parts.size() == 1) return directory("ids", newest);
    auto it = index.by_short_id.find(parts[1]);
    if (parts.size() > 2 || it == index.by_short_id.end()) return nullptr;
    const auto& s = index.snapshots[it->second];
    return symlink(it->first, "../snapshots/" + index.names[it->second], s.time_ns);
  }
  if (const auto* groups = group_of(index, top)) {
    if (parts.size() == 1) return directory(std::string(top), newest);
    auto group = groups->find(parts[1]);
    if (group == groups->end() || parts.size() > 3) return nullptr;
    const std::vector<size_t>& members = group->second;
    if (parts.size() == 2) return directory(group->first, index.snapshots[members.back()].time_ns);
    size_t chosen = members.back();
    if (parts[2] != "latest") {
      auto named = index.by_name.find(parts[2]);
      if (named == index.by_name.end() || !std::binary_search(members.begin(), members.end(), named->second)) {
        return nullptr;
      }
      chosen = named->second;
    }
    return symlink(std::string(parts[2]), "../../snapshots/" + index.names[chosen], index.snapshots[chosen].time_ns);
  }
  if (top != "snapshots") return nullptr;
  if (parts.size() == 1) return directory("snapshots", newest);
  if (parts[1] == "latest") {
    if (parts.size() > 2 || index.snapshots.empty()) return nullptr;
    return symlink("latest", index.names.back(), newest);
  }
  auto named = index.by_name.find(parts[1]);
  if (named == index.by_name.end()) return nullptr;
  std::shared_ptr<const TreeEntry> current = snapshot_root(index, named->second);
  for (size_t i = 2; i < parts.size(); ++i) {
    if (current->meta.type != NodeType::kDir) return nullptr;
    std::shared_ptr<const Tree> dir = tree(current->subtree);
    const TreeEntry* next = dir->find(parts[i]);
    if (!next) return nullptr;
    current = std::shared_ptr<const TreeEntry>(dir, next);  // shares the cached tree's lifetime
  }
  return current;
}

bool SnapshotFs::list(std::string_view path, const std::function<void(const TreeEntry&)>& fn) {
  std::vector<std::string_view> parts = split(path);
  std::shared_ptr<const SnapshotIndex> idx = index();  // one view for the whole listing
  const SnapshotIndex& index = *idx;
  std::shared_ptr<const TreeEntry> at = resolve_in(index, parts);
  if (!at || at->meta.type != NodeType::kDir) return false;
  if (parts.empty()) {
    for (const char* name : {"snapshots", "hosts", "tags", "ids"}) fn(*resolve_in(index, {name}));
    return true;
  }
  std::string_view top = parts[0];
  if (parts.size() == 1 && top == "ids") {
    for (const auto& [id, i] : index.by_short_id) fn(*symlink(id, "../snapshots/" + index.names[i], index.snapshots[i].time_ns));
    return true;
  }
  if (const auto* groups = group_of(index, top)) {
    if (parts.size() == 1) {
      for (const auto& [name, members] : *groups) fn(*directory(name, index.snapshots[members.back()].time_ns));
      return true;
    }
    const std::vector<size_t>& members = groups->find(parts[1])->second;
    for (size_t i : members) {
      fn(*symlink(index.names[i], "../../snapshots/" + index.names[i], index.snapshots[i].time_ns));
    }
    fn(*symlink("latest", "../../snapshots/" + index.names[members.back()], index.snapshots[members.back()].time_ns));
    return true;
  }
  if (parts.size() == 1) {  // /snapshots
    for (size_t i = 0; i < index.snapshots.size(); ++i) fn(*directory(index.names[i], index.snapshots[i].time_ns));
    if (!index.snapshots.empty()) fn(*symlink("latest", index.names.back(), index.snapshots.back().time_ns));
    return true;
  }
  for (const TreeEntry& e : tree(at->subtree)->entries) {
    // A damaged or hostile tree may hold names no path can reach: left out, as restore does.
    if (e.meta.name.empty() || e.meta.name == "." || e.meta.name == ".." || e.meta.name.find('/') != std::string::npos) {
      continue;
    }
    fn(e);
  }
  return true;
}

struct stat SnapshotFs::attributes(const TreeEntry& entry) const {
  const NodeMeta& m = entry.meta;
  struct stat st;
  std::memset(&st, 0, sizeof st);
  st.st_mode = mode_type(m.type) | (m.mode & 07777);
  st.st_nlink = m.type == NodeType::kDir ? 2 : std::max<uint64_t>(1, m.nlink);
  st.st_uid = m.uid;
  st.st_gid = m.gid;
  st.st_rdev = m.rdev;
  st.st_size = static_cast<off_t>(m.type == NodeType::kSymlink ? m.symlink_target.size() : m.size);
  st.st_blksize = 4096;
  uint64_t stored = 0;
  for (const ContentRef& ref : entry.content) stored += ref.hole ? 0 : ref.length;
  st.st_blocks = static_cast<blkcnt_t>((stored + 511) / 512);
  st.st_mtim = to_timespec(m.mtime_ns);
  st.st_atim = st.st_mtim;  // atime is not stored
  st.st_ctim = to_timespec(m.ctime_ns);
  return st;
}

FileHandle* SnapshotFs::open(std::string_view path) {
  std::shared_ptr<const TreeEntry> entry = resolve(path);
  if (!entry || entry->meta.type != NodeType::kFile) return nullptr;
  auto file = std::make_unique<FileHandle>(FileLayout(entry->content));
  FileHandle* raw = file.get();
  std::lock_guard lock(files_mu_);
  open_files_.emplace(raw, std::move(file));
  return raw;
}

void SnapshotFs::close(FileHandle* file) {
  std::lock_guard lock(files_mu_);
  open_files_.erase(file);
}

size_t SnapshotFs::read(FileHandle& file, uint64_t offset, std::span<uint8_t> out) {
  const FileLayout& layout = file.layout;
  std::vector<Piece> pieces = layout.pieces(offset, out.size());
  // Every chunk of the read is asked for before any is waited on: they are fetched in parallel.
  std::vector<std::shared_future<Chunk>> chunks(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ContentRef& ref = layout.refs()[pieces[i].index];
    if (!ref.hole) chunks[i] = cache_.get(ref.chunk);
  }
  uint64_t end = pieces.empty() ? offset : offset + pieces.back().out_offset + pieces.back().length;
  if (file.next_sequential.exchange(end) == offset) read_ahead(file, end);
  size_t done = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    const ContentRef& ref = layout.refs()[p.index];
    uint8_t* dest = out.data() + p.out_offset;
    if (ref.hole) {
      std::memset(dest, 0, p.length);
    } else {
      Chunk chunk = chunks[i].get();
      if (chunk->size() != ref.length) {
        throw Error(ErrorKind::kIntegrity, "chunk " + ref.chunk.short_hex() + " holds " +
                                               std::to_string(chunk->size()) + " bytes, the file's tree says " +
                                               std::to_string(ref.length));
      }
      std::memcpy(dest, chunk->data() + p.offset, p.length);
    }
    done = p.out_offset + p.length;
  }
  return done;
}

void SnapshotFs::read_ahead(FileHandle& file, uint64_t from) {
  const FileLayout& layout = file.layout;
  std::optional<size_t> first = layout.chunk_at(from);
  if (!first) return;
  uint64_t until = from + options_.read_ahead;
  for (size_t i = *first; i < layout.refs().size() && layout.start(i) < until; ++i) {
    if (!layout.refs()[i].hole) cache_.prefetch(layout.refs()[i].chunk);
  }
}

}  // namespace keel::engine::mount
