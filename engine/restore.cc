#include "engine/restore.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>

#include "engine/content.h"
#include "engine/piece_hasher.h"
#include "targets/local/direct_file.h"
#include "util/checksum.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/file_system.h"
#include "util/huge_pages.h"
#include "util/path.h"
#include "util/spares.h"
#include "util/thread_pool.h"

namespace keel::engine {
namespace {

// The components of a path in a snapshot, which may not climb out of it.
std::vector<std::string> snapshot_path_parts(const std::string& path) {
  std::vector<std::string> parts = split_path(path);
  for (const std::string& part : parts) {
    if (part == "..") throw Error(ErrorKind::kUsage, "path " + path + " may not contain '..'");
  }
  return parts;
}

// Is `path` equal to, below, or (for directories) above one of `includes`?
enum class Inclusion { kNo, kAncestor, kYes };
Inclusion included(const std::string& path, const std::vector<std::string>& includes) {
  if (includes.empty()) return Inclusion::kYes;
  Inclusion best = Inclusion::kNo;
  for (const std::string& inc : includes) {
    if (path_within(path, inc)) return Inclusion::kYes;
    if (path_within(inc, path)) best = Inclusion::kAncestor;
  }
  return best;
}

// Files are written under a temporary name beside their destination and
// renamed into place once verified, so a destination path holds either
// what was there before or the snapshot's verified file, never a partial
// one; what a killed restore leaves under such names the next restore into
// that directory removes.
constexpr std::string_view kPartialMarker = ".keel-partial-";

bool is_partial_leftover(std::string_view name) {
  return name.size() > 1 && name[0] == '.' && name.find(kPartialMarker) != std::string_view::npos;
}

// Removes the partial files an interrupted restore left in `dir`; returns
// how many. One that cannot be read or removed is left: the files restored
// into it are reported if they fail.
uint64_t remove_partial_leftovers(FileSystem& fs, const std::string& dir) {
  std::vector<std::string> leftovers;
  {
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) return 0;
    while (const dirent* e = ::readdir(d.get())) {
      if (is_partial_leftover(e->d_name)) leftovers.push_back(join_path(dir, e->d_name));
    }
  }
  uint64_t removed = 0;
  for (const std::string& path : leftovers) removed += fs.unlink(path) == 0;
  return removed;
}

// The tree `id` of a snapshot. One the repository cannot give is damage
// (the snapshot names it), so a blob the index lacks is reported as an
// integrity error, not as "not found".
Tree load_snapshot_tree(Repository& repo, const Id& id, const std::string& dir) {
  try {
    return repo.load_tree(id);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInterrupted) throw;
    ErrorKind kind = e.kind() == ErrorKind::kNotFound ? ErrorKind::kIntegrity : e.kind();
    throw Error(kind, "the tree of " + dir + " (" + id.short_hex() + ") cannot be read: " + e.what());
  }
}

// Files from this size up are written around the page cache
// (targets/local/direct_file.h): copying a restore into the page cache was
// a third of its CPU, and a restore of many GB would evict the machine's
// working set. Smaller files go through the page cache: they gain little
// (their last block does anyway) and are many.
constexpr uint64_t kDirectMinSize = 1 << 20;
// A file written directly stays open from its first piece to its last; at
// most this many at once, the others are written as small ones are.
constexpr size_t kMaxDirectFiles = 64;
// A reader thread gathers the consecutive pieces of a file written directly
// (a range of a pack is mostly one file's chunks, in order) and writes them
// as one run of up to this many bytes: one O_DIRECT write and I/O submission
// where there was one per piece (1 MiB on average), each costing the
// paravirtual VM an interrupt, and no bounce copy, since the run sits in its
// buffer as in the file's blocks. One buffer per reader thread. Its 8 MiB
// (two 4 MiB requests on the development VM's virtio disk, whose
// max_sectors_kb is 4096) also holds the largest default chunk whole.
constexpr size_t kGatherSize = 8 << 20;
// Copies of pieces that arrived before their turn to be hashed (PieceHasher),
// held by all files together; beyond it they are read back from the disk.
// Four reader threads on one large file run up to three ranges (of 16 MiB
// stored, 40 MB restored on average on the mixed dataset) ahead of the
// hashed front.
constexpr uint64_t kHoldEarly = 256ull << 20;

struct FileTask {
  size_t index = 0;     // in planning order
  std::string path;     // its destination on disk
  std::string partial;  // where it is written until verified
  const TreeEntry* entry;
  std::atomic<uint64_t> remaining{0};  // data bytes not yet written or failed
  std::atomic<bool> failed{false};
  ErrorKind failure = ErrorKind::kFailure;  // set by whoever sets `failed`
  std::atomic<bool> on_disk{false};         // `partial` was created
  // Files with data are created by the reader that writes their first
  // piece: creating inodes is slow on a busy filesystem, and the readers
  // do it in parallel where the planner could only do it one by one.
  std::once_flag created;
  // Verifies the file from its pieces as they are written (docs in
  // piece_hasher.h); absent where the file is read back from disk instead.
  std::unique_ptr<PieceHasher> hasher;
  // Where it is written around the page cache (set when it is created);
  // null for small files, which are opened for each piece.
  std::unique_ptr<targets::local::DirectFile> direct;
  std::atomic<bool> written_directly{false};  // `direct` is set: for threads that did not create it
};

// The first path of a hard-linked inode, and the others linked to it.
struct LinkGroup {
  std::string head;
  FileTask* task = nullptr;  // null where the head was kept as it was
  std::vector<std::string> links;
};

// Creates `path` (a partial name: anything there is a leftover to replace)
// empty, sized to `size` (sparse) unless the caller's first write sets the
// size; returns it open for writing. The exclusive create comes first and
// only what is there gets unlinked: a path lookup saved per file.
// `mode`: the restored file's permission bits, so that most files need no
// chmod at the end; plus read and write for us while it is written (each
// piece of a small file opens it again). Group and others get no bit they
// do not get on the restored file, and the directories a restore creates
// stay 0700 until it ends.
UniqueFd create_file(FileSystem& fs, const std::string& path, mode_t mode, uint64_t size, bool sized_by_first_write) {
  // Readable too: verification may read an early piece back.
  constexpr int kCreate = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  mode = (mode & 0777) | 0600;
  UniqueFd fd(fs.open(path, kCreate, mode));
  if (!fd) {
    if (errno != EEXIST) throw_errno("create " + path, errno);
    fs.unlink(path);
    fd = open_or_throw(fs, path, kCreate, mode);
  }
  if (size > 0 && !sized_by_first_write && fs.ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    throw_errno("truncate " + path, errno);
  }
  return fd;
}

// Where metadata is applied: a file open for writing (the f* calls), or a
// path that is not followed if it is a symlink (fd < 0: the l* calls).
// `now`: the file's stat where the caller took one, else null.
struct MetaTarget {
  int fd;
  const std::string& path;
  const struct stat* now = nullptr;
};

struct Destination {
  FileTask* file;
  uint64_t offset;
};

// A run of one file's consecutive pieces waiting in a reader thread's
// buffer to be written at once (RestoreRun::gather).
struct Gather {
  AlignedBuffer buffer;      // kGatherSize + one block; byte `start % kBlock` is the run's first
  FileTask* file = nullptr;  // null: nothing waits
  uint64_t start = 0;        // the run's file offset
  uint64_t end = 0;          // one past its last byte
  std::vector<std::pair<uint64_t, size_t>> pieces;  // each piece's offset and size, in order

  uint8_t* at(uint64_t offset) { return buffer.get() + start % targets::local::DirectFile::kBlock + (offset - start); }
  bool continued_by(const FileTask& f, uint64_t offset, size_t size) const {
    return file == &f && offset == end && start % targets::local::DirectFile::kBlock + (end + size - start) <=
                                               kGatherSize + targets::local::DirectFile::kBlock;
  }
};

struct BlobNeed {
  Id id;
  uint64_t length = 0;  // its plaintext
  catalog::BlobLocation loc;
  std::vector<Destination> destinations;
};

class RestoreRun {
 public:
  RestoreRun(Repository& repo, const RestoreOptions& options, RestoreProgress& progress)
      : repo_(repo),
        options_(options),
        progress_(progress),
        fs_(file_system_or_posix(options.file_system)),
        partial_tag_(Id::random().hex().substr(0, 8)) {}

  RestoreResult run(const catalog::SnapshotRecord& snapshot) {
    if (!options_.verify_only) prepare_target();
    plan(snapshot);
    try {
      fetch_all();
    } catch (...) {
      discard_unfinished();
      throw;
    }
    if (!options_.verify_only) {
      link_all();
      for (auto& [path, entry] : meta_items_) apply_meta({-1, path}, entry->meta);
      for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) apply_meta({-1, it->first}, it->second);
    }
    for (const auto& file : files_) {
      if (file->failed) {
        ++result_.files_failed;
      } else if (options_.verify || options_.verify_only) {
        ++result_.files_verified;
      } else {
        ++result_.files_unverified;
      }
    }
    result_.failures = std::move(failures_);
    result_.stage_cpu_seconds = progress_.stage_cpu.all_seconds();
    result_.cpu_seconds = process_cpu_seconds();
    return result_;
  }

 private:
  void fail(const std::string& path, const std::string& reason, ErrorKind kind) {
    std::lock_guard lock(mu_);
    ++progress_.errors;
    failures_.push_back({path, reason, kind});
  }
  void fail(const std::string& path, const Error& error) { fail(path, error.what(), error.kind()); }

  // The first failure of a file is the one reported.
  void mark_failed(FileTask& file, const Error& error) {
    if (file.failed.exchange(true)) return;
    file.failure = error.kind();
    fail(file.path, error);
  }

  // Creates the target directory; one that exists but cannot be written is
  // refused before anything is planned, rather than failing every file.
  void prepare_target() {
    const std::string& dir = options_.target_dir;
    std::error_code ec;
    bool created = std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(ErrorKind::kTargetIo, "restore target " + dir + ": cannot create it: " + ec.message());
    if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
      throw_errno("restore target " + dir + ": cannot write into it", errno);
    }
    if (!created) result_.partial_files_removed += remove_partial_leftovers(fs_, dir);
  }

  void make_dir(const std::string& path) {
    if (fs_.mkdir(path, 0700) == 0) return;
    if (errno != EEXIST) throw_errno("mkdir " + path, errno);
    result_.partial_files_removed += remove_partial_leftovers(fs_, path);
  }

  void plan(const catalog::SnapshotRecord& snapshot) {
    const std::string& dest = options_.target_dir;
    const std::string start_path = options_.subpath.empty() ? "/" : options_.subpath;
    TreeEntry start = find_entry(repo_, snapshot, start_path);
    if (start.meta.type == NodeType::kDir) {
      try {
        holder_ = load_snapshot_tree(repo_, start.subtree, start_path);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kInterrupted) throw;
        throw Error(e.kind(), "snapshot " + snapshot.id.short_hex() + ": " + e.what());
      }
      plan_tree(holder_, "/", dest);
    } else {
      holder_.entries.push_back(std::move(start));
      const std::string& name = holder_.entries.back().meta.name;
      plan_entry(holder_.entries.back(), "/" + name, join_path(dest, name));
    }
  }

  void plan_tree(const Tree& tree, const std::string& snap_dir, const std::string& disk_dir) {
    for (const TreeEntry& e : tree.entries) {
      if (e.meta.name.empty() || e.meta.name.find('/') != std::string::npos || e.meta.name == "." ||
          e.meta.name == "..") {
        fail(join_path(disk_dir, e.meta.name), "unsafe name in snapshot tree; skipped", ErrorKind::kIntegrity);
        continue;
      }
      plan_entry(e, join_path(snap_dir, e.meta.name), join_path(disk_dir, e.meta.name));
    }
  }

  void plan_entry(const TreeEntry& e, const std::string& snap_path, const std::string& disk_path) {
    Inclusion inc = included(snap_path, options_.includes);
    if (inc == Inclusion::kNo) return;
    if (inc == Inclusion::kAncestor && e.meta.type != NodeType::kDir) return;
    if (options_.verify_only && e.meta.type != NodeType::kDir && e.meta.type != NodeType::kFile) return;
    try {
      switch (e.meta.type) {
        case NodeType::kDir: {
          // The tree first: a directory whose tree is lost is reported
          // and not created, and its siblings restore.
          std::unique_ptr<Tree> tree;
          try {
            tree = std::make_unique<Tree>(load_snapshot_tree(repo_, e.subtree, snap_path));
          } catch (const Error& err) {
            if (err.kind() == ErrorKind::kInterrupted) throw;
            fail(disk_path, std::string(err.what()) + "; nothing below it restored", err.kind());
            return;
          }
          if (!options_.verify_only) {
            make_dir(disk_path);
            dirs_.emplace_back(disk_path, e.meta);
          }
          trees_.push_back(std::move(tree));
          ++result_.dirs;
          plan_tree(*trees_.back(), snap_path, disk_path);
          return;
        }
        case NodeType::kFile:
          plan_file(e, snap_path, disk_path);
          return;
        case NodeType::kSymlink:
          ::unlink(disk_path.c_str());
          if (::symlink(e.meta.symlink_target.c_str(), disk_path.c_str()) != 0) throw_errno("symlink " + disk_path, errno);
          break;
        case NodeType::kFifo:
          ::unlink(disk_path.c_str());
          if (::mkfifo(disk_path.c_str(), 0600) != 0) throw_errno("mkfifo " + disk_path, errno);
          break;
        case NodeType::kCharDevice:
        case NodeType::kBlockDevice: {
          ::unlink(disk_path.c_str());
          mode_t kind = e.meta.type == NodeType::kCharDevice ? S_IFCHR : S_IFBLK;
          if (::mknod(disk_path.c_str(), kind | 0600, static_cast<dev_t>(e.meta.rdev)) != 0) {
            throw_errno("mknod " + disk_path, errno);
          }
          break;
        }
        case NodeType::kSocket:
          return;  // a socket cannot be restored; its owner recreates it
      }
      meta_items_.emplace_back(disk_path, &e);
    } catch (const Error& err) {
      if (err.kind() == ErrorKind::kInterrupted) throw;
      fail(disk_path, err);
    }
  }

  // Deterministic per path and seed, so a drill's sample can be repeated.
  bool sampled(const std::string& path) const {
    if (options_.sample >= 1.0) return true;
    uint64_t h = XXH3_64bits_withSeed(path.data(), path.size(), options_.sample_seed);
    return static_cast<double>(h % 1000000) < options_.sample * 1000000.0;
  }

  // Whether the file already at `path` stays, per options_.overwrite.
  bool keep_existing(const TreeEntry& e, const std::string& path) {
    if (options_.overwrite == Overwrite::kAlways) return false;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return false;
    if (options_.overwrite == Overwrite::kNever) return true;
    if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != e.meta.size) return false;
    try {
      return hash_file(path) == e.file_hash;
    } catch (const Error&) {
      return false;  // unreadable: restore it over
    }
  }

  // Makes the next read come from the disk, not from what was just written.
  static void drop_from_cache(const std::string& path) {
    UniqueFd fd = open_or_throw(path, O_RDONLY | O_NOFOLLOW);
    if (::fdatasync(fd.get()) != 0) throw_errno("flush " + path, errno);
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }

  static Hash128 hash_file(const std::string& path) {
    UniqueFd fd = open_or_throw(path, O_RDONLY | O_NOFOLLOW);
    Xxh3Stream hash;
    Bytes buf(1 << 20);
    for (;;) {
      size_t n = read_full(fd.get(), buf, "read " + path);
      if (n == 0) break;
      hash.update(ByteView(buf.data(), n));
    }
    return hash.digest();
  }

  // A name beside `disk_path` that no file of the snapshot has, within
  // NAME_MAX however long the file's own name is.
  std::string partial_path(const std::string& disk_path) {
    size_t slash = disk_path.rfind('/');
    size_t name_at = slash == std::string::npos ? 0 : slash + 1;
    std::string name = disk_path.substr(name_at, 200);
    return disk_path.substr(0, name_at) + "." + name + std::string(kPartialMarker) + partial_tag_ + "-" +
           std::to_string(++partial_count_);
  }

  void plan_file(const TreeEntry& e, const std::string& snap_path, const std::string& disk_path) {
    if (!sampled(snap_path)) return;
    LinkGroup* group = nullptr;
    if (e.meta.nlink > 1 && !options_.verify_only) {
      auto [it, first] = link_groups_.try_emplace(std::make_pair(e.meta.device, e.meta.inode));
      if (!first) {
        it->second.links.push_back(disk_path);
        return;
      }
      it->second.head = disk_path;
      group = &it->second;
    }
    ++result_.files;
    result_.bytes += e.meta.size;
    if (!options_.verify_only && keep_existing(e, disk_path)) {
      ++result_.files_kept;
      ++progress_.files_done;
      meta_items_.emplace_back(disk_path, &e);
      return;
    }
    auto task = std::make_unique<FileTask>();
    task->index = files_.size();
    task->path = disk_path;
    task->partial = partial_path(disk_path);
    task->entry = &e;
    uint64_t offset = 0, data = 0;
    for (const ContentRef& ref : e.content) {
      if (!ref.hole) {
        BlobNeed& need = needs_[ref.chunk];
        need.length = ref.length;
        need.destinations.push_back({task.get(), offset});
        data += ref.length;
      }
      offset += ref.length;
    }
    task->remaining = data;
    progress_.bytes_total += e.meta.size;
    ++progress_.files_total;
    FileTask* raw = task.get();
    files_.push_back(std::move(task));
    if (group) group->task = raw;
    if (data == 0) {
      UniqueFd fd;
      if (!options_.verify_only) {
        try {
          fd = create(*raw, /*sized_by_first_write=*/false);
        } catch (const Error& err) {
          mark_failed(*raw, err);
        }
      }
      finish_file(*raw, fd.get());
    }
  }

  // Locates the needed blobs; those the index lacks fail their files.
  std::vector<BlobNeed*> locate() {
    std::vector<Id> ids;
    std::vector<BlobNeed*> asked;
    ids.reserve(needs_.size());
    asked.reserve(needs_.size());
    for (auto& [id, need] : needs_) {
      need.id = id;
      ids.push_back(id);
      asked.push_back(&need);
    }
    std::vector<std::optional<catalog::BlobLocation>> locations = repo_.catalog().find_blobs(ids);
    // A pack another host wrote without a change-log entry (its backup was
    // killed, a later one reused the pack) is found only by a full sync.
    if (std::any_of(locations.begin(), locations.end(), [](const auto& l) { return !l; })) {
      repo_.sync_catalog();
      locations = repo_.catalog().find_blobs(ids);
    }
    std::vector<BlobNeed*> found;
    found.reserve(asked.size());
    for (size_t i = 0; i < asked.size(); ++i) {
      BlobNeed& need = *asked[i];
      if (!locations[i]) {
        fail_blob(need, Error(ErrorKind::kIntegrity,
                              "chunk " + need.id.short_hex() + " is missing from the index of " + repo_.target().describe()));
        continue;
      }
      need.loc = std::move(*locations[i]);
      found.push_back(&need);
    }
    return found;
  }

  // First what lets files finish early: small files and the first bytes of
  // large ones (lowest offset in a file, then smallest file), so a user
  // watching sees files appear at once and a drill's first file is fast.
  // Within a range (Content::read takes its blobs in the order given), blobs
  // go in file order: backup seals a file's chunks on
  // parallel workers, so its packs hold them slightly shuffled, and a piece
  // written before its predecessor is read back from disk to be verified
  // (and ends a gathered run).
  static void order_by_urgency(std::vector<PackRange>& ranges, const std::vector<BlobNeed*>& needs) {
    for (PackRange& range : ranges) {
      auto in_file_order = [&](size_t i) {
        const Destination& d = needs[i]->destinations.front();
        return std::make_pair(d.file->index, d.offset);
      };
      std::stable_sort(range.blobs.begin(), range.blobs.end(),
                       [&](size_t a, size_t b) { return in_file_order(a) < in_file_order(b); });
    }
    auto urgency = [&](const PackRange& range) {
      std::pair<uint64_t, uint64_t> best{UINT64_MAX, UINT64_MAX};
      for (size_t i : range.blobs) {
        for (const Destination& d : needs[i]->destinations) best = std::min(best, {d.offset, d.file->entry->meta.size});
      }
      return best;
    };
    std::vector<std::pair<std::pair<uint64_t, uint64_t>, size_t>> order;
    order.reserve(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) order.emplace_back(urgency(ranges[i]), i);
    std::stable_sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<PackRange> sorted;
    sorted.reserve(ranges.size());
    for (auto& [key, i] : order) sorted.push_back(std::move(ranges[i]));
    ranges = std::move(sorted);
  }

  // Hands each blob the content layer reads to the files it fills. After
  // the last blob of a range, what the reader thread gathered is written
  // and its buffer handed back (range_done): Content::read hands a range's
  // blobs over on one thread in range order, and the next range is mostly
  // another file's (whatever a thread still holds at the end is written by
  // fetch_all).
  class Filler : public BlobSink {
   public:
    Filler(RestoreRun& run, const std::vector<BlobNeed*>& needs, std::vector<bool> last_in_range)
        : run_(run), needs_(needs), last_in_range_(std::move(last_in_range)) {}
    void deliver(size_t index, ByteView raw) override {
      run_.fill(*needs_[index], raw);
      if (last_in_range_[index]) run_.range_done();
    }
    std::span<uint8_t> place(size_t index, size_t length) override { return run_.place(*needs_[index], length); }
    void fail(size_t index, const Error& error) override {
      run_.fail_blob(*needs_[index], error);
      if (last_in_range_[index]) run_.range_done();
    }

   private:
    RestoreRun& run_;
    const std::vector<BlobNeed*>& needs_;
    const std::vector<bool> last_in_range_;  // by blob
  };

  void fetch_all() {
    std::vector<BlobNeed*> needs = locate();
    std::vector<catalog::BlobLocation> locations;
    locations.reserve(needs.size());
    for (const BlobNeed* need : needs) locations.push_back(need->loc);
    std::vector<PackRange> ranges = plan_reads(locations, options_.coalesce_gap, options_.max_read);
    order_by_urgency(ranges, needs);
    std::vector<bool> last_in_range(needs.size());
    for (const PackRange& range : ranges) last_in_range[range.blobs.back()] = true;
    Filler filler(*this, needs, std::move(last_in_range));
    ReadOptions read{.form = BlobForm::kOpened,
                     .readers = options_.readers,
                     .memory_budget = options_.memory_budget,
                     .cancel = options_.cancel,
                     .cpu = cpu()};
    result_.peak_readers = repo_.content().read(locations, ranges, read, filler).peak_readers;
    for (auto& [thread, gather] : gathers_) write_gathered(*gather);
    gathers_.clear();
  }

  StageCpu* cpu() { return &progress_.stage_cpu; }

  // `raw` hashes to its id: the content layer verified it (content.h).
  void fill(const BlobNeed& need, ByteView raw) {
    for (const Destination& d : need.destinations) write_piece(*d.file, d.offset, raw);
  }

  void fail_blob(const BlobNeed& need, const Error& error) {
    for (const Destination& d : need.destinations) {
      mark_failed(*d.file, error);
      account(*d.file, need.length, -1);
    }
  }

  void write_piece(FileTask& file, uint64_t offset, ByteView data) {
    UniqueFd fd;
    if (options_.verify_only) {
      progress_.bytes_done += data.size();
    } else if (!file.failed) {
      try {
        {
          StageTimer timer(cpu(), Stage::kWrite);
          bool whole_file = offset == 0 && data.size() == file.entry->meta.size;
          std::call_once(file.created, [&] { fd = create(file, whole_file); });
          if (!file.direct) {
            if (!fd) fd = open_or_throw(fs_, file.partial, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
            pwrite_all(fs_, fd.get(), data, static_cast<off_t>(offset), "write " + file.path);
          }
        }
        if (file.direct) {
          gather(file, offset, data);  // written, verified and accounted with its run
          return;
        }
        progress_.bytes_done += data.size();
        if (file.hasher) {
          StageTimer timer(cpu(), Stage::kVerify);
          verify_piece(file, offset, data, fd.get());
        }
      } catch (const Error& e) {
        mark_failed(file, e);
      }
    }
    account(file, data.size(), fd.get());
  }

  // A piece of `file` is in place: hashes it, or what it lets be hashed.
  // `fd`: the file open for reading, unless it is written directly.
  void verify_piece(FileTask& file, uint64_t offset, ByteView data, int fd) {
    if (!file.hasher) return;
    // Not through fs_: how much is read back depends on the order pieces
    // arrive in, and an injected file system must see the same calls each run.
    auto read_back = [&](std::span<uint8_t> out, uint64_t at) -> size_t {
      if (!file.direct) return pread_full(fd, out, static_cast<off_t>(at), "read back " + file.path);
      file.direct->read(out, at);
      return out.size();
    };
    file.hasher->written(read_back, offset, data);
  }

  // This reader thread's run (kGatherSize): the spare buffer returned last,
  // if any. Held from a range's first gathered piece to its end, so there
  // are as many buffers as ranges of large files were read at once, not
  // one per reader thread: each costs 8 MiB of fresh memory (page faults,
  // 2.6-6 ms of CPU per MiB on the development VM).
  Gather& thread_gather() {
    std::lock_guard lock(gathers_mu_);
    std::unique_ptr<Gather>& g = gathers_[std::this_thread::get_id()];
    if (!g) g = spare_gathers_.take();
    return *g;
  }

  // The end of a range on this thread: writes what it gathered and hands
  // the buffer back for the next range any thread reads.
  void range_done() {
    std::unique_ptr<Gather> g;
    {
      std::lock_guard lock(gathers_mu_);
      auto it = gathers_.find(std::this_thread::get_id());
      if (it == gathers_.end()) return;
      g = std::move(it->second);
      gathers_.erase(it);
    }
    write_gathered(*g);
    spare_gathers_.give(std::move(g));
  }

  // Adds a piece of a file written directly to this thread's run, writing
  // the run first if the piece does not continue it. A piece too large for
  // the buffer is written on its own, from where it is. A piece placed in
  // the run (place) is not copied.
  void gather(FileTask& file, uint64_t offset, ByteView data) {
    if (data.size() > kGatherSize) {
      Gather& g = thread_gather();
      write_gathered(g);
      const std::pair<uint64_t, size_t> piece{offset, data.size()};
      write_run(file, offset, data, std::span(&piece, 1));
      return;
    }
    StageTimer timer(cpu(), Stage::kWrite);
    Gather& g = run_for(file, offset, data.size());
    if (data.data() != g.at(offset)) std::memcpy(g.at(offset), data.data(), data.size());
    g.end += data.size();
    g.pieces.emplace_back(offset, data.size());
  }

  // This thread's run, ready to take `size` bytes of `file` at `offset`
  // (at g.at(offset)): the run written first where the piece does not
  // continue it.
  Gather& run_for(FileTask& file, uint64_t offset, size_t size) {
    Gather& g = thread_gather();
    if (g.file && !g.continued_by(file, offset, size)) write_gathered(g);
    if (!g.file) {
      if (!g.buffer) g.buffer = allocate_aligned(kGatherSize + targets::local::DirectFile::kBlock);
      g.file = &file;
      g.start = g.end = offset;
    }
    return g;
  }

  // Where a blob of `length` bytes is best opened (BlobSink::place): in this
  // thread's run, when its only place is the next piece of a file written
  // directly. Opened elsewhere, it was copied there (8% of a restore's CPU
  // was such copies).
  std::span<uint8_t> place(const BlobNeed& need, size_t length) {
    if (options_.verify_only || need.destinations.size() != 1 || length > kGatherSize) return {};
    const Destination& d = need.destinations.front();
    FileTask& file = *d.file;
    if (file.failed || !file.written_directly) return {};
    Gather& g = run_for(file, d.offset, length);
    return {g.at(d.offset), length};
  }

  void write_gathered(Gather& g) {
    if (!g.file) return;
    FileTask& file = *std::exchange(g.file, nullptr);
    if (g.pieces.empty()) return;  // a run begun for a placed blob that then failed
    write_run(file, g.start, ByteView(g.at(g.start), g.end - g.start), g.pieces);
    g.pieces.clear();
  }

  // Writes `run`, consecutive `pieces` of a file written directly, from
  // file offset `start`; then verifies and accounts each piece (only now:
  // a piece read back for verification must be in the file).
  void write_run(FileTask& file, uint64_t start, ByteView run, std::span<const std::pair<uint64_t, size_t>> pieces) {
    if (!file.failed) {
      try {
        {
          StageTimer timer(cpu(), Stage::kWrite);
          file.direct->write(run, start);
        }
        progress_.bytes_done += run.size();
        if (file.hasher) {
          StageTimer timer(cpu(), Stage::kVerify);
          for (const auto& [offset, size] : pieces) verify_piece(file, offset, run.subspan(offset - start, size), -1);
        }
      } catch (const Error& e) {
        mark_failed(file, e);
      }
    }
    for (const auto& [offset, size] : pieces) account(file, size, -1);
  }

  // `bytes` of the file were written or failed; whoever accounts for the
  // last ones finishes it. `fd`: the file open for writing, or -1.
  void account(FileTask& file, uint64_t bytes, int fd) {
    if (file.remaining.fetch_sub(bytes) == bytes) finish_file(file, fd);
  }

  // Creates the file on disk under its partial name and, unless it is
  // verified from disk, what verifies it as its pieces are written (held
  // only until it is finished).
  // A large file is handed to file.direct, and the result is empty. Only
  // on the real file system: the injected one sees every write.
  UniqueFd create(FileTask& file, bool sized_by_first_write) {
    file.on_disk = true;  // before: a create that fails half way is removed too
    UniqueFd fd = create_file(fs_, file.partial, file.entry->meta.mode, file.entry->meta.size, sized_by_first_write);
    if (options_.verify && !options_.verify_from_disk) {
      file.hasher = std::make_unique<PieceHasher>(file.entry->content, &early_pieces_);
    }
    const bool large = !options_.file_system && file.entry->meta.size >= kDirectMinSize && file.remaining > 0;
    if (large && direct_files_.fetch_add(1) < kMaxDirectFiles) {
      file.direct = std::make_unique<targets::local::DirectFile>(std::move(fd), file.partial, /*direct=*/true);
      file.written_directly = true;
    } else if (large) {
      --direct_files_;
    }
    return fd;
  }

  // Writes what a direct file still holds in memory; returns its descriptor.
  int finish_direct(FileTask& file) {
    try {
      StageTimer timer(cpu(), Stage::kWrite);
      file.direct->finish();
    } catch (const Error& e) {
      mark_failed(file, e);
    }
    return file.direct->fd();
  }

  void close_direct(FileTask& file) {
    if (!file.direct) return;
    file.direct.reset();
    --direct_files_;
  }

  // Checks the partial file, sets its metadata and renames it into place;
  // a file that failed is removed, leaving its destination as it was.
  // `fd`: the file open for writing, or -1 where it was not opened (a
  // verify-only run, or a file that already failed).
  void finish_file(FileTask& file, int fd) {
    if (!options_.verify_only) {
      if (file.direct) fd = finish_direct(file);
      const std::optional<struct stat> now = check_content(file, fd);
      StageTimer timer(cpu(), Stage::kWrite);
      file.hasher.reset();
      // Metadata now, through the descriptor and on the reader's thread: by
      // path, after all files, it was a serial tail of path lookups.
      if (!file.failed && fd >= 0) apply_meta({fd, file.path, now ? &*now : nullptr}, file.entry->meta);
      if (!file.failed && fs_.rename(file.partial, file.path) != 0) {
        mark_failed(file, Error(ErrorKind::kTargetIo, "rename " + file.partial + " into place: " + std::strerror(errno)));
      }
      if (file.failed && file.on_disk) fs_.unlink(file.partial);
      close_direct(file);
    }
    ++progress_.files_done;
    if (!file.failed) {
      int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                         progress_.started).count();
      int64_t unset = 0;
      progress_.first_file_ns.compare_exchange_strong(unset, std::max<int64_t>(1, now));
    }
  }

  // `fd`: the file, open; a file written without failing always has one.
  // Returns the stat it took of the file, if any.
  std::optional<struct stat> check_content(FileTask& file, int fd) {
    if (file.failed || !options_.verify) return std::nullopt;
    StageTimer timer(cpu(), Stage::kVerify);
    struct stat st;
    try {
      if (fs_.fstat(fd, &st) != 0) throw_errno("stat " + file.partial, errno);
      std::optional<Hash128> hashed = file.hasher ? file.hasher->finish() : std::nullopt;
      if (!hashed) {
        if (options_.verify_from_disk) drop_from_cache(file.partial);
        hashed = hash_file(file.partial);
      }
      if (static_cast<uint64_t>(st.st_size) != file.entry->meta.size || *hashed != file.entry->file_hash) {
        throw Error(ErrorKind::kIntegrity, "restored content does not match the snapshot's checksum");
      }
    } catch (const Error& e) {
      mark_failed(file, e);
      return std::nullopt;
    }
    return st;
  }

  // After an interrupted read: the partial files never finished go.
  void discard_unfinished() {
    for (const auto& file : files_) {
      if (file->remaining != 0 && file->on_disk) fs_.unlink(file->partial);
    }
  }

  // Hard links last, each to its group's first path; never to one that
  // failed, whose destination holds no restored file.
  void link_all() {
    for (auto& [inode, group] : link_groups_) {
      for (const std::string& link : group.links) {
        if (group.task && group.task->failed) {
          fail(link, "not linked: " + group.head + ", the first path of its inode, failed to restore",
               group.task->failure);
          continue;
        }
        ::unlink(link.c_str());
        if (::link(group.head.c_str(), link.c_str()) != 0) {
          fail(link, std::string("link: ") + std::strerror(errno), ErrorKind::kTargetIo);
        }
      }
    }
  }

  // Owner and mode are set only where they differ from what the caller's
  // or our own stat saw: restoring as the files' owner, a chown per file was
  // 1.5% of a restore's CPU.
  void apply_meta(MetaTarget target, const NodeMeta& m) {
    const std::string& path = target.path;
    const char* p = path.c_str();
    const int fd = target.fd;
    struct stat st;
    if (fd < 0) {
      if (::lstat(p, &st) != 0) return;  // never created: its failure was already reported
      target.now = &st;
    }
    const bool set_owner = as_root_ && !(target.now && target.now->st_uid == m.uid && target.now->st_gid == m.gid);
    if (set_owner && (fd >= 0 ? ::fchown(fd, m.uid, m.gid) : ::lchown(p, m.uid, m.gid)) != 0) {
      fail(path, std::string("chown: ") + std::strerror(errno), ErrorKind::kTargetIo);
    }
    for (const Xattr& x : m.xattrs) {
      const char* name = x.name.c_str();
      int rc = fd >= 0 ? ::fsetxattr(fd, name, x.value.data(), x.value.size(), 0)
                       : ::lsetxattr(p, name, x.value.data(), x.value.size(), 0);
      if (rc != 0 && errno != ENOTSUP && errno != EPERM) {
        fail(path, "set xattr " + x.name + ": " + std::strerror(errno), ErrorKind::kTargetIo);
      }
    }
    // A chown clears the set-id bits, so the mode seen before it counts only without one.
    const bool same_mode = !set_owner && target.now && (target.now->st_mode & 07777) == (m.mode & 07777);
    if (m.type != NodeType::kSymlink && !same_mode &&
        (fd >= 0 ? ::fchmod(fd, m.mode & 07777) : ::chmod(p, m.mode & 07777)) != 0) {
      fail(path, std::string("chmod: ") + std::strerror(errno), ErrorKind::kTargetIo);
    }
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = m.mtime_ns / 1000000000;
    times[0].tv_nsec = times[1].tv_nsec = m.mtime_ns % 1000000000;
    if ((fd >= 0 ? ::futimens(fd, times) : ::utimensat(AT_FDCWD, p, times, AT_SYMLINK_NOFOLLOW)) != 0) {
      fail(path, std::string("set times: ") + std::strerror(errno), ErrorKind::kTargetIo);
    }
  }

  Repository& repo_;
  const RestoreOptions& options_;
  RestoreProgress& progress_;
  FileSystem& fs_;
  const std::string partial_tag_;  // this run's, in its partial names
  const bool as_root_ = ::geteuid() == 0;  // sets owners
  uint64_t partial_count_ = 0;
  RestoreResult result_;

  std::mutex mu_;
  std::vector<RestoreFailure> failures_;
  Tree holder_;
  std::vector<std::unique_ptr<Tree>> trees_;  // entries point into these
  std::vector<std::pair<std::string, NodeMeta>> dirs_;
  std::vector<std::pair<std::string, const TreeEntry*>> meta_items_;
  EarlyPieceMemory early_pieces_{kHoldEarly};  // before files_, whose hashers hold its blocks
  std::vector<std::unique_ptr<FileTask>> files_;
  std::atomic<size_t> direct_files_{0};  // open as FileTask::direct
  std::mutex gathers_mu_;
  std::unordered_map<std::thread::id, std::unique_ptr<Gather>> gathers_;  // by reader thread, while it reads a range
  Spares<Gather> spare_gathers_;                                         // empty, for the next range
  std::unordered_map<Id, BlobNeed, IdHash> needs_;
  std::map<std::pair<uint64_t, uint64_t>, LinkGroup> link_groups_;
};

}  // namespace

bool RestoreResult::damaged() const {
  return std::any_of(failures.begin(), failures.end(), [](const RestoreFailure& f) { return f.damaged(); });
}

TreeEntry find_entry(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& path) {
  TreeEntry current;
  current.meta.type = NodeType::kDir;
  current.meta.mode = 0755;
  current.subtree = snapshot.root;
  std::string dir = "/";
  for (const std::string& part : snapshot_path_parts(path)) {
    if (current.meta.type != NodeType::kDir) {
      throw Error(ErrorKind::kNotFound, path + ": not a directory in snapshot " + snapshot.id.short_hex());
    }
    Tree tree = load_snapshot_tree(repo, current.subtree, dir);
    dir = join_path(dir, part);
    const TreeEntry* next = tree.find(part);
    if (!next) throw Error(ErrorKind::kNotFound, path + ": not in snapshot " + snapshot.id.short_hex());
    current = *next;
  }
  return current;
}

void walk_snapshot(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& start,
                   const std::function<void(const std::string&, const TreeEntry&)>& fn) {
  TreeEntry top = find_entry(repo, snapshot, start);
  std::string base = "/";
  for (const std::string& part : snapshot_path_parts(start)) base = join_path(base, part);
  if (top.meta.type != NodeType::kDir) {
    fn(base, top);
    return;
  }
  std::vector<std::pair<std::string, Id>> stack{{base, top.subtree}};
  while (!stack.empty()) {
    auto [dir, id] = stack.back();
    stack.pop_back();
    Tree tree = load_snapshot_tree(repo, id, dir);
    // Push subdirectories in reverse so they are visited in name order.
    for (auto it = tree.entries.rbegin(); it != tree.entries.rend(); ++it) {
      if (it->meta.type == NodeType::kDir) stack.emplace_back(join_path(dir, it->meta.name), it->subtree);
    }
    for (const TreeEntry& e : tree.entries) fn(join_path(dir, e.meta.name), e);
  }
}

uint64_t stream_file(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& path, int fd,
                     size_t prefetch) {
  TreeEntry entry = find_entry(repo, snapshot, path);
  if (entry.meta.type != NodeType::kFile) {
    throw Error(ErrorKind::kUsage, path + " is a " + node_type_name(entry.meta.type) + ", not a file, in snapshot " +
                                       snapshot.id.short_hex());
  }
  const std::vector<ContentRef>& refs = entry.content;
  prefetch = std::max<size_t>(1, prefetch);
  std::deque<std::future<Bytes>> inflight;
  // Declared after `inflight`, so joined before the futures go.
  ThreadPool readers(prefetch, prefetch);
  size_t next = 0;
  auto launch = [&] {
    while (inflight.size() < prefetch && next < refs.size()) {
      const ContentRef& ref = refs[next++];
      auto promise = std::make_shared<std::promise<Bytes>>();
      inflight.push_back(promise->get_future());
      if (ref.hole) {
        promise->set_value(Bytes());
        continue;
      }
      readers.submit([&repo, promise, id = ref.chunk] {
        try {
          promise->set_value(repo.content().read(id));
        } catch (...) {
          promise->set_exception(std::current_exception());
        }
      });
    }
  };
  Xxh3Stream hash;
  uint64_t written = 0;
  static const Bytes kZeros(1 << 20);
  for (size_t i = 0; i < refs.size(); ++i) {
    launch();
    Bytes data = inflight.front().get();
    inflight.pop_front();
    if (refs[i].hole) {
      for (uint64_t left = refs[i].length; left > 0;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(left, kZeros.size()));
        write_all(fd, ByteView(kZeros.data(), n), "write " + path + " to output");
        left -= n;
      }
      hash.update_zeros(refs[i].length);
    } else {
      write_all(fd, data, "write " + path + " to output");
      hash.update(data);
    }
    written += refs[i].length;
  }
  if (written != entry.meta.size || hash.digest() != entry.file_hash) {
    throw Error(ErrorKind::kIntegrity, path + " in snapshot " + snapshot.id.short_hex() +
                                           ": streamed content does not match its checksum");
  }
  return written;
}

RestoreResult run_restore(Repository& repo, const catalog::SnapshotRecord& snapshot, const RestoreOptions& options,
                          RestoreProgress& progress) {
  RestoreRun run(repo, options, progress);
  return run.run(snapshot);
}

}  // namespace keel::engine
