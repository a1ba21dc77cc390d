#include "engine/backup.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>

#include "engine/blob_codec.h"
#include "engine/catalog_copy.h"
#include "engine/object_lock.h"
#include "engine/blob_index.h"
#include "engine/chunk_sealer.h"
#include "engine/chunker.h"
#include "engine/compress.h"
#include "engine/lease.h"
#include "engine/content.h"
#include "engine/stage_clock.h"
#include "util/buffer_pool.h"
#include "util/error.h"
#include "util/host.h"
#include "util/huge_pages.h"
#include "util/path.h"
#include "util/thread_pool.h"

namespace keel::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Reads are at least this large (but for a file's last): a fresh buffer
// holds the unconsumed tail of the one before (under one max-size chunk)
// and at least one such read.
constexpr size_t kReadSize = 2u << 20;

// Trees cached in the catalog per transaction.
constexpr size_t kTreesPerTransaction = 1024;

// Chunks go to the workers in batches of up to this many bytes or chunks:
// a task per chunk cost a wake-up and a context switch per small file, and
// a worker names the chunks of a batch together, several at a time
// (chunk_ids), which needs several chunks of large files in one batch. A
// small --memory makes batches smaller (down to kMinBatchBytes), so that
// several still fit the chunk budget at once and every worker has one.
constexpr size_t kBatchBytes = 8u << 20;
constexpr size_t kMinBatchBytes = 1u << 20;
constexpr size_t kBatchChunks = 64;

bool all_zero(ByteView data) {
  return !data.empty() && data[0] == 0 && std::memcmp(data.data(), data.data() + 1, data.size() - 1) == 0;
}

// One chunk of a file whose id a worker has yet to fill in.
struct PendingRef {
  ContentRef ref;
};

// A file being stored: its chunks finish on workers, in any order.
struct FileSlot {
  std::vector<std::shared_ptr<PendingRef>> refs;
  std::atomic<int> pending{0};
  Hash128 hash{};
  bool failed = false;  // set by the walker thread only

  void chunk_done() {
    if (pending.fetch_sub(1) == 1) pending.notify_all();
  }
  void wait() {
    for (int p = pending.load(); p != 0; p = pending.load()) pending.wait(p);
  }
};

struct DirSlot {
  Id tree;
};

// A chunk a worker is to store: it lies in `buf`, and names `ref` of `file`.
struct ChunkJob {
  std::shared_ptr<FileSlot> file;
  std::shared_ptr<PendingRef> ref;
  std::shared_ptr<uint8_t[]> buf;
  ByteView data;
};

struct PendingEntry {
  NodeMeta meta;
  std::vector<ContentRef> content;   // files reused from the parent snapshot
  Hash128 hash{};                    // ditto
  std::shared_ptr<FileSlot> file;    // files being read now
  std::shared_ptr<DirSlot> dir;      // directories
};

struct DirFrame {
  NodeMeta meta;
  std::string path;
  std::vector<PendingEntry> entries;
  std::optional<Tree> parent_tree;  // the same directory in the parent snapshot
  std::shared_ptr<DirSlot> slot = std::make_shared<DirSlot>();
};

bool unchanged(const NodeMeta& now, const TreeEntry& before) {
  const NodeMeta& b = before.meta;
  return b.type == NodeType::kFile && now.size == b.size && now.mtime_ns == b.mtime_ns && now.ctime_ns == b.ctime_ns &&
         now.inode == b.inode && now.device == b.device;
}

}  // namespace

size_t read_buffer_size(const ChunkerParams& chunker) {
  return (size_t{chunker.max_size} + kReadSize + kHugePageSize - 1) / kHugePageSize * kHugePageSize;
}

size_t read_buffer_count(size_t buffer_size, size_t workers, size_t memory_budget) {
  return std::min(memory_budget / 2 / buffer_size, workers) + 2;
}

namespace {

class BackupRun : public SourceSink {
 public:
  BackupRun(Repository& repo, const BackupOptions& options, BackupProgress& progress,
            const std::function<void(const SkippedItem&)>& on_skip, const Tree* parent_root)
      : repo_(repo),
        options_(options),
        progress_(progress),
        on_skip_(on_skip),
        parent_root_(parent_root),
        chunker_(repo.config().chunker, repo.keys().chunker),
        index_(repo.catalog(), repo.keys()),
        chunk_budget_(options.memory_budget / 2),
        part_budget_(options.memory_budget / 2),
        read_buffers_(read_buffer_size(repo.config().chunker), read_buffer_count(repo.config(), options)),
        uploads_(4, 16),
        packs_(repo.content(), pack_options(repo.config(), progress.stage_cpu), uploads_, part_budget_),
        workers_(worker_count(options), 64),
        batch_limit_(std::clamp(options.memory_budget / 2 / (2 * worker_count(options)), kMinBatchBytes, kBatchBytes)) {}

  // Walks the source and returns the root tree once every blob is durable.
  Id run(Source& source) {
    source.walk(*this);
    submit_batch();
    walk_clock_.unclaimed();
    walk_clock_.flush();  // the backup's account is read before this run ends
    if (!stack_.empty()) throw Error(ErrorKind::kFailure, "source ended inside a directory");
    if (!root_) throw Error(ErrorKind::kFailure, "source produced no root directory");
    finalize_dirs(/*all=*/true);
    flush_tree_cache();
    work_.wait();
    packs_.flush();
    return root_->tree;
  }

  size_t peak_buffered() { return chunk_budget_.peak() + part_budget_.peak(); }
  std::vector<SkippedItem> take_skipped() { return std::move(skipped_); }
  std::string first_skipped() const {
    return skipped_.empty() ? std::string() : skipped_.front().path + ": " + skipped_.front().reason;
  }
  std::vector<LoggedPack> take_committed_packs() { return packs_.take_committed(); }

  void enter_dir(const NodeMeta& dir) override {
    check_cancel();
    auto frame = std::make_unique<DirFrame>();
    frame->meta = dir;
    if (stack_.empty()) {
      if (root_) throw Error(ErrorKind::kFailure, "source produced two roots");
      frame->path = "/";
      if (parent_root_) frame->parent_tree = *parent_root_;
      root_ = frame->slot;
    } else {
      DirFrame& parent = *stack_.back();
      frame->path = join_path(parent.path, dir.name);
      if (parent.parent_tree) {
        const TreeEntry* before = parent.parent_tree->find(dir.name);
        if (before && before->meta.type == NodeType::kDir) frame->parent_tree = parent_tree(before->subtree);
      }
      PendingEntry entry;
      entry.meta = dir;
      entry.dir = frame->slot;
      parent.entries.push_back(std::move(entry));
    }
    ++progress_.dirs;
    stack_.push_back(std::move(frame));
  }

  void leave_dir() override {
    if (stack_.empty()) throw Error(ErrorKind::kFailure, "source left more directories than it entered");
    closed_.push_back(std::move(stack_.back()));
    stack_.pop_back();
    finalize_dirs(/*all=*/closed_.size() > 4096);
  }

  void add_node(const NodeMeta& meta, const OpenFile& open) override {
    check_cancel();
    if (stack_.empty()) throw Error(ErrorKind::kFailure, "source added " + meta.name + " outside any directory");
    DirFrame& dir = *stack_.back();
    PendingEntry entry;
    entry.meta = meta;
    if (meta.type == NodeType::kFile) {
      ++progress_.files;
      const TreeEntry* before = dir.parent_tree ? dir.parent_tree->find(meta.name) : nullptr;
      if (before && !options_.reread_unchanged && unchanged(meta, *before) && reusable(before->content)) {
        entry.content = before->content;
        entry.hash = before->file_hash;
        progress_.bytes += meta.size;
      } else {
        std::string path = join_path(dir.path, meta.name);
        entry.file = std::make_shared<FileSlot>();
        try {
          entry.meta.size = read_file(open, meta.size, entry.file);
        } catch (const Error& e) {
          if (e.kind() == ErrorKind::kInterrupted) throw;
          entry.file->failed = true;
          skip(path, e.what());
        }
      }
    }
    dir.entries.push_back(std::move(entry));
  }

  void skip(const std::string& path, const std::string& reason) override {
    ++progress_.errors;
    skipped_.push_back({path, reason});
    if (on_skip_) on_skip_(skipped_.back());
  }

 private:
  static size_t worker_count(const BackupOptions& o) {
    return o.workers ? o.workers : std::max(1u, std::thread::hardware_concurrency());
  }
  static size_t read_buffer_count(const RepoConfig& c, const BackupOptions& o) {
    return engine::read_buffer_count(read_buffer_size(c.chunker), worker_count(o), o.memory_budget);
  }
  static PackWriterOptions pack_options(const RepoConfig& c, StageCpu& cpu) { return {c.pack_size, c.part_size, &cpu}; }

  void check_cancel() {
    if (options_.cancel && options_.cancel->load()) throw Error(ErrorKind::kInterrupted, "backup interrupted");
    if (work_.failed()) work_.wait();  // rethrows the worker's error
  }

  // An unchanged file keeps its chunk references only if every chunk is in
  // the dedupe index: one in a pack a prune condemned may be deleted, so the
  // file is read (and the chunk stored) again.
  bool reusable(const std::vector<ContentRef>& content) {
    return std::all_of(content.begin(), content.end(), [this](const ContentRef& r) { return r.hole || index_.contains(r.chunk); });
  }

  // Reads, hashes and chunks one file; returns the bytes of content.
  // Files follow one another in the walker's pool buffer (read_buf_), so
  // small files share one instead of each faulting in fresh memory; a file
  // moves to a fresh buffer when the rest of it (by `size_hint`, the size at
  // stat time) would not fit, carrying its unchunked tail along.
  uint64_t read_file(const OpenFile& open, uint64_t size_hint, const std::shared_ptr<FileSlot>& file) {
    FileSlot& slot = *file;
    // A read may wait for the disk, which the walker's laps (monotonic
    // time) cannot tell from work: a read the page cache answers
    // (read_cached) is weighed like any lap, and any other is measured on
    // the thread's CPU clock between flushes. So a small file in the page
    // cache costs no clock read (it cost two, 87,571 system calls in a
    // backup of the 4 GiB mixed dataset). Opening counts as reading: after
    // the stat, it finds the inode in memory.
    walk_clock_.unclaimed();  // walking to this file
    std::unique_ptr<FileReader> reader = open();
    const size_t capacity = read_buffers_.buffer_size();
    Xxh3Stream hash;
    if (!read_buf_) {
      read_buf_ = read_buffers_.get();
      read_buf_used_ = 0;
    }
    std::shared_ptr<uint8_t[]> buf = std::move(read_buf_);
    size_t start = read_buf_used_, end = start;  // unchunked data: buf[start, end)
    uint64_t file_pos = 0;                       // file offset of buf[end]
    StageClock& clock = walk_clock_;
    // However this ends, the next file reads after what this one wrote:
    // workers may still be reading its chunks.
    struct KeepBuffer {
      BackupRun& run;
      std::shared_ptr<uint8_t[]>& buf;
      size_t& end;
      ~KeepBuffer() { run.keep_read_buffer(std::move(buf), end); }
    } keep{*this, buf, end};

    auto cut = [&](bool final) {
      bool emitted = false;
      while (start < end) {
        size_t n = chunker_.next_cut(ByteView(buf.get() + start, end - start), final);
        if (n == 0) break;
        emit_chunk(file, buf, start, n);
        start += n;
        emitted = true;
      }
      if (emitted) clock.lap(Stage::kChunk);
    };
    for (;;) {
      check_cancel();
      const size_t room = capacity - end;
      // One byte more than the rest, so the end-of-file read needs no new buffer.
      if (room == 0 || (room < kReadSize && room <= size_hint - std::min(size_hint, file_pos))) {
        // Carry the unchunked tail (under one max-size chunk) to a fresh buffer.
        // Chunks of the batch may pin the buffers: the pool waits for them.
        submit_batch();
        auto next = read_buffers_.get();
        clock.skip();
        std::memcpy(next.get(), buf.get() + start, end - start);
        end -= start;
        start = 0;
        buf = std::move(next);
      }
      // The end-of-file read (at the size from the stat) finds no data to wait for.
      const bool may_wait = file_pos < size_hint;
      const std::span<uint8_t> space(buf.get() + end, capacity - end);
      std::optional<Extent> cached = may_wait ? reader->read_cached(space) : std::nullopt;
      Extent ext;
      if (cached) {
        ext = *cached;
        clock.lap(Stage::kRead);
      } else if (may_wait) {
        clock.lap(Stage::kRead);  // opening, the attempt
        clock.flush();
        ext = reader->read(space);
        clock.lap(Stage::kRead);
        clock.flush();
      } else {
        ext = reader->read(space);
        clock.lap(Stage::kRead);
      }
      if (ext.offset < file_pos) throw Error(ErrorKind::kFailure, "file reader went backwards");
      if (ext.offset > file_pos) {  // a hole: close the data before it
        cut(true);
        add_hole(slot, ext.offset - file_pos);
        hash.update_zeros(ext.offset - file_pos);
        file_pos = ext.offset;
      }
      if (ext.length == 0) break;
      hash.update(ByteView(buf.get() + end, ext.length));
      clock.lap(Stage::kHash);
      end += ext.length;
      file_pos += ext.length;
      progress_.bytes_read += ext.length;
      progress_.bytes += ext.length;
      cut(false);
    }
    cut(true);
    slot.hash = hash.digest();
    return file_pos;
  }

  void keep_read_buffer(std::shared_ptr<uint8_t[]> buf, size_t end) {
    constexpr size_t kAlign = 64;
    read_buf_used_ = (end + kAlign - 1) / kAlign * kAlign;
    read_buf_ = read_buf_used_ < read_buffers_.buffer_size() ? std::move(buf) : nullptr;
  }

  void add_hole(FileSlot& slot, uint64_t length) {
    auto ref = std::make_shared<PendingRef>();
    ref->ref.hole = true;
    ref->ref.length = length;
    slot.refs.push_back(std::move(ref));
  }

  void emit_chunk(const std::shared_ptr<FileSlot>& file, const std::shared_ptr<uint8_t[]>& buf, size_t offset,
                  size_t length) {
    ByteView data(buf.get() + offset, length);
    if (all_zero(data)) {
      add_hole(*file, length);
      return;
    }
    auto ref = std::make_shared<PendingRef>();
    ref->ref.length = length;
    file->refs.push_back(ref);
    file->pending.fetch_add(1);
    batch_.push_back({file, std::move(ref), buf, data});
    batch_bytes_ += length;
    if (batch_bytes_ >= batch_limit_ || batch_.size() >= kBatchChunks) submit_batch();
  }

  // Hands the batched chunks to a worker. Called before the walker waits
  // for any file to finish, or for a pool buffer the batch may pin.
  void submit_batch() {
    if (batch_.empty()) return;
    walk_clock_.lap(Stage::kChunk);
    const size_t bytes = std::exchange(batch_bytes_, 0);
    chunk_budget_.acquire(bytes);
    work_.started();
    workers_.submit(work_.wrap([this, jobs = std::exchange(batch_, {}), bytes] {
      // Every chunk's file hears it is done, stored or not (a failed chunk
      // fails the run, whose walker may be waiting on any of these files).
      size_t next = 0;
      struct Done {
        BackupRun& run;
        const std::vector<ChunkJob>& jobs;
        size_t& next;
        size_t bytes;
        ~Done() {
          for (; next < jobs.size(); ++next) jobs[next].file->chunk_done();
          run.chunk_budget_.release(bytes);
        }
      } done{*this, jobs, next, bytes};
      StageClock clock(&progress_.stage_cpu);
      name_chunks(jobs);
      clock.lap(Stage::kHash);
      for (; next < jobs.size(); ++next) {
        store_chunk(jobs[next].data, jobs[next].ref->ref, clock);
        jobs[next].file->chunk_done();
      }
    }));
    walk_clock_.skip();  // waiting for budget or queue room is no stage's
  }

  // Runs on a worker: the ids of a batch's chunks, computed together.
  void name_chunks(const std::vector<ChunkJob>& jobs) {
    thread_local std::vector<ByteView> chunks;
    thread_local std::vector<Id> ids;
    chunks.clear();
    for (const ChunkJob& job : jobs) chunks.push_back(job.data);
    ids.resize(jobs.size());
    chunk_ids(repo_, chunks, ids);
    for (size_t i = 0; i < jobs.size(); ++i) jobs[i].ref->ref.chunk = ids[i];
  }

  // Runs on a worker: dedupes, compresses, seals and packs a named chunk.
  void store_chunk(ByteView data, ContentRef& ref, StageClock& clock) {
    const bool claimed = index_.claim(ref.chunk);  // dedupe: only the first of equal chunks is stored
    clock.lap(Stage::kHash);
    if (!claimed) return;
    thread_local Bytes sealed;
    seal_chunk(repo_, ref.chunk, data, options_.compression_level.value_or(repo_.config().compression_level), sealed,
               &clock);
    progress_.bytes_added += sealed.size();
    ++progress_.chunks_added;
    packs_.add(catalog::BlobType::kData, ref.chunk, static_cast<uint32_t>(data.size()), sealed);
    clock.lap(Stage::kWrite);
  }

  // Turns closed directories into trees, oldest first (children close
  // before their parents). Without `all`, stops at the first directory
  // whose files are still being stored.
  void finalize_dirs(bool all) {
    if (all) submit_batch();
    while (!closed_.empty()) {
      DirFrame& dir = *closed_.front();
      for (PendingEntry& e : dir.entries) {
        if (!e.file) continue;
        if (!all && e.file->pending.load() != 0) return;
        e.file->wait();
      }
      if (work_.failed()) work_.wait();
      store_tree(dir);
      closed_.pop_front();
    }
  }

  void store_tree(DirFrame& dir) {
    Tree tree;
    tree.entries.reserve(dir.entries.size());
    for (PendingEntry& e : dir.entries) {
      TreeEntry t;
      t.meta = std::move(e.meta);
      t.meta.atime_ns = 0;
      if (e.file) {
        if (e.file->failed) continue;
        t.content.reserve(e.file->refs.size());
        for (auto& r : e.file->refs) t.content.push_back(r->ref);
        t.file_hash = e.file->hash;
      } else if (t.meta.type == NodeType::kFile) {
        t.content = std::move(e.content);
        t.file_hash = e.hash;
      } else if (e.dir) {
        t.subtree = e.dir->tree;
      }
      tree.entries.push_back(std::move(t));
    }
    std::sort(tree.entries.begin(), tree.entries.end(),
              [](const TreeEntry& a, const TreeEntry& b) { return a.meta.name < b.meta.name; });
    Bytes body = tree.encode();
    Id id = chunk_id(repo_, body);
    if (index_.claim(id)) {
      Bytes sealed;
      seal_tree(repo_, id, body, sealed);
      progress_.bytes_added += sealed.size();
      packs_.add(catalog::BlobType::kTree, id, static_cast<uint32_t>(body.size()), sealed);
      cache_tree(id, std::move(body));
    } else if (repo_.put_only()) {
      cache_tree(id, std::move(body));  // its next run compares against it: it cannot read it back
    }
    dir.slot->tree = id;
  }

  // Trees go to the catalog in batches, a transaction per batch: one per
  // tree (per directory) cost more than the rest of a small directory.
  void cache_tree(const Id& id, Bytes body) {
    trees_to_cache_.emplace_back(id, std::move(body));
    if (trees_to_cache_.size() >= kTreesPerTransaction) flush_tree_cache();
  }

  void flush_tree_cache() {
    if (trees_to_cache_.empty()) return;
    StageTimer timer(&progress_.stage_cpu, Stage::kCatalog);
    repo_.catalog().transaction([this] {
      for (const auto& [id, body] : trees_to_cache_) repo_.cache_tree(id, body);
    });
    trees_to_cache_.clear();
  }

  // A put-only key compares against the trees its catalog holds (those it
  // wrote); a directory it has none for is read in full, its chunks still
  // deduplicated by id.
  std::optional<Tree> parent_tree(const Id& id) {
    return repo_.put_only() ? repo_.cached_tree(id) : repo_.load_tree(id);
  }

  Repository& repo_;
  const BackupOptions& options_;
  BackupProgress& progress_;
  const std::function<void(const SkippedItem&)>& on_skip_;
  const Tree* parent_root_;
  Chunker chunker_;
  BlobIndex index_;
  ByteBudget chunk_budget_;
  ByteBudget part_budget_;
  BufferPool read_buffers_;
  std::shared_ptr<uint8_t[]> read_buf_;  // the buffer the next file reads into, from read_buf_used_ on
  size_t read_buf_used_ = 0;
  std::vector<ChunkJob> batch_;  // chunks cut but not yet handed to a worker
  size_t batch_bytes_ = 0;
  StageClock walk_clock_{&progress_.stage_cpu};  // the walker's (this run's calling thread)
  TaskGroup work_;
  // Destroyed in reverse: chunk workers are joined first (their tasks use
  // the pack writer), then the pack writer waits for its uploads, and the
  // upload pool is joined last.
  ThreadPool uploads_;
  ContentWriter packs_;
  ThreadPool workers_;
  const size_t batch_limit_;  // bytes of chunks per worker task

  std::vector<std::unique_ptr<DirFrame>> stack_;
  std::deque<std::unique_ptr<DirFrame>> closed_;
  std::shared_ptr<DirSlot> root_;
  std::vector<std::pair<Id, Bytes>> trees_to_cache_;
  std::vector<SkippedItem> skipped_;
};

std::optional<catalog::SnapshotRecord> pick_parent(Repository& repo, const BackupOptions& options,
                                                   const std::string& host, const std::vector<std::string>& paths) {
  if (options.parent) return repo.catalog().get_snapshot(*options.parent);
  std::vector<catalog::SnapshotRecord> all = repo.catalog().list_snapshots();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    // A put-only key knows the paths and trees of its own snapshots alone.
    if (it->host == host && it->paths == paths && (!repo.put_only() || repo.catalog().get_tree(it->root))) return *it;
  }
  return std::nullopt;
}

}  // namespace

BackupResult run_backup(Repository& repo, Source& source, const BackupOptions& options, BackupProgress& progress,
                        const std::function<void(const SkippedItem&)>& on_skip) {
  auto started = Clock::now();
  int64_t started_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Tells prune that this run may use any pack it indexes now; written
  // before the catalog is synced, so a prune that condemns a pack after this
  // run read the condemnations sees the lease and keeps the pack until the
  // run has ended (docs/maintenance.md).
  Lease running(repo.target(), repo.keys().index, kRunningPrefix, LeaseOptions::for_access(options.append_only));
  // Index packs an interrupted run (or another host) left on the target, so
  // this run reuses them instead of uploading their chunks again, and learn
  // which packs prune condemned or deleted (the repository was opened with
  // the log followed; again now that the lease is there).
  repo.follow_log();
  // Uploads a crashed run left open; a day's age keeps concurrent runs' safe.
  // Aborting is a DELETE: append-only access leaves them to the owner's prune.
  if (!options.append_only) repo.target().remove_stale_uploads(std::chrono::hours(24));

  std::string host = options.host.empty() ? local_hostname() : options.host;
  std::vector<std::string> paths = source.paths();
  std::sort(paths.begin(), paths.end());
  std::optional<catalog::SnapshotRecord> parent = pick_parent(repo, options, host, paths);
  std::optional<Tree> parent_root;
  if (parent) {
    parent_root = repo.load_tree(parent->root);
    progress.expected_bytes = parent->stats.bytes;
  }

  // A stream that fails is the backup's error (below), not an item skipped on the way.
  const std::function<void(const SkippedItem&)> no_report;
  BackupRun run(repo, options, progress, source.all_or_nothing() ? no_report : on_skip,
                parent_root ? &*parent_root : nullptr);
  Id root = run.run(source);
  if (source.all_or_nothing() && progress.errors != 0) {
    // The chunks already stored stay in their packs for the next run to reuse.
    throw Error(ErrorKind::kFailure, "no snapshot saved: " + run.first_skipped());
  }

  BackupResult result;
  catalog::SnapshotRecord& snap = result.snapshot;
  snap.id = Id::random();
  snap.time_ns = started_ns;
  snap.host = host;
  const char* user = std::getenv("USER");
  snap.username = user ? user : "";
  snap.paths = paths;
  snap.tags = options.tags;
  if (parent) snap.parent = parent->id;
  snap.root = root;
  snap.stats.files = progress.files;
  snap.stats.dirs = progress.dirs;
  snap.stats.bytes = progress.bytes;
  snap.stats.bytes_read = progress.bytes_read;
  snap.stats.bytes_added = progress.bytes_added;
  snap.stats.chunks_added = progress.chunks_added;
  snap.stats.errors = progress.errors;
  snap.stats.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  running.check_held();
  {
    StageTimer timer(&progress.stage_cpu, Stage::kCatalog);
    repo.save_snapshot(snap, run.take_committed_packs());
    try {
      renew_snapshot_retention(repo, snap);  // Object Lock: older packs it uses stay locked as long as it needs
    } catch (const Error& e) {
      throw Error(e.kind(), "snapshot " + snap.id.short_hex() + " saved, but locking the packs it uses longer failed (" +
                                e.what() + "); the next backup or keel prune tries again",
                  e.transient() ? Persistence::kTransient : Persistence::kPermanent);
    }
    if (options.copy_catalog) {
      result.catalog_copy_error = try_save_catalog_copy(repo, options.append_only ? kKeepAllCopies : kKeptCopies);
    }
  }
  result.skipped = run.take_skipped();
  result.peak_buffered_bytes = run.peak_buffered();
  result.stage_cpu_seconds = progress.stage_cpu.all_seconds();
  result.cpu_seconds = process_cpu_seconds();
  return result;
}

}  // namespace keel::engine
