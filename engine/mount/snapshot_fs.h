// The read-only file tree `keel mount` shows, independent of FUSE:
//
//   /snapshots/<time>/...        each snapshot's files ("2026-11-26T03:52:20Z", UTC;
//                                "-<short id>" added where two share a second)
//   /snapshots/latest            symlink to the newest
//   /hosts/<host>/<time>, latest symlinks to ../../snapshots/<time>
//   /tags/<tag>/<time>, latest   the same, per tag
//   /ids/<short id>              symlink to ../snapshots/<time>
//
// Listings and attributes come from the catalog's trees (decoded trees are
// cached); file content from chunks through a ChunkCache, found by offset
// through each open file's FileLayout. The snapshot list is re-read from the
// catalog at most once per `refresh`, so new backups appear.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/mount/chunk_cache.h"
#include "engine/mount/file_layout.h"
#include "engine/mount/mount_source.h"

namespace keel::engine::mount {

struct MountOptions {
  uint64_t cache_bytes = 256ull << 20;  // chunks kept in memory
  uint64_t tree_cache_bytes = 64ull << 20;  // decoded trees kept in memory (about)
  uint64_t read_ahead = 8ull << 20;     // fetched ahead of a sequential reader
  size_t fetchers = 0;                  // parallel chunk fetches; 0: 2 per core, at least 4
  std::chrono::milliseconds refresh{1000};
  uint32_t uid = 0;  // owner of the synthetic directories (the mounting user)
  uint32_t gid = 0;
};

// The snapshots as the top levels name them. Built from the catalog's list.
struct SnapshotIndex {
  explicit SnapshotIndex(std::vector<catalog::SnapshotRecord> records);

  std::vector<catalog::SnapshotRecord> snapshots;  // oldest first
  std::vector<std::string> names;                  // directory name of each
  std::map<std::string, size_t, std::less<>> by_name;
  std::map<std::string, size_t, std::less<>> by_short_id;
  std::map<std::string, std::vector<size_t>, std::less<>> by_host;  // oldest first
  std::map<std::string, std::vector<size_t>, std::less<>> by_tag;
};

// A file opened through the mount.
struct FileHandle {
  explicit FileHandle(FileLayout l) : layout(std::move(l)) {}
  FileLayout layout;
  std::atomic<uint64_t> next_sequential{0};  // where a sequential reader reads next
};

class SnapshotFs {
 public:
  SnapshotFs(MountSource& source, MountOptions options);

  // The entry at `path` ("/a/b"); null if there is none. Synthetic levels
  // get synthetic entries; a snapshot's directory gets its root tree.
  // Throws keel::Error if the catalog or a tree cannot be read.
  std::shared_ptr<const TreeEntry> resolve(std::string_view path);
  // Calls `fn` for each entry of the directory at `path`; false if there is
  // no directory there.
  bool list(std::string_view path, const std::function<void(const TreeEntry&)>& fn);
  // stat(2) of an entry, as the snapshot recorded it.
  struct stat attributes(const TreeEntry& entry) const;

  // Null if `path` is not a regular file. The file system owns the handle
  // until close(), or until it is destroyed: the kernel need not release
  // every file that is still open when the mount goes.
  FileHandle* open(std::string_view path);
  void close(FileHandle* file);
  // Reads into `out` from `offset`; returns the bytes read (fewer at the end
  // of the file). Holes read as zeros. Throws keel::Error if a chunk cannot be read.
  size_t read(FileHandle& file, uint64_t offset, std::span<uint8_t> out);

  ChunkCache& cache() { return cache_; }
  std::shared_ptr<const SnapshotIndex> index();

 private:
  std::shared_ptr<const TreeEntry> resolve_in(const SnapshotIndex& index, const std::vector<std::string_view>& parts);
  std::shared_ptr<const Tree> tree(const Id& id);
  std::shared_ptr<TreeEntry> directory(std::string name, int64_t mtime_ns) const;
  std::shared_ptr<TreeEntry> symlink(std::string name, std::string target, int64_t mtime_ns) const;
  std::shared_ptr<const TreeEntry> snapshot_root(const SnapshotIndex& index, size_t i) const;
  void read_ahead(FileHandle& file, uint64_t from);

  MountSource& source_;
  MountOptions options_;
  std::mutex mu_;  // guards the index and the tree cache
  std::shared_ptr<const SnapshotIndex> index_;
  std::chrono::steady_clock::time_point index_loaded_;
  LruCache<Id, Tree, IdHash> trees_;
  ChunkCache cache_;
  std::mutex files_mu_;  // guards open_files_
  std::unordered_map<FileHandle*, std::unique_ptr<FileHandle>> open_files_;
};

// Bytes a decoded tree holds, about: what the tree cache counts.
uint64_t tree_weight(const Tree& tree);

}  // namespace keel::engine::mount
