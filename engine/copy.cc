#include "engine/copy.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "engine/blob_index.h"
#include "engine/chunk_sealer.h"
#include "engine/content.h"
#include "engine/crypto.h"
#include "engine/lease.h"
#include "engine/pack_output.h"
#include "util/error.h"

namespace keel::engine {
namespace {

constexpr uint64_t kCoalesceGap = 1ull << 20;
constexpr uint64_t kMaxRead = 16ull << 20;
constexpr uint64_t kReadBudget = 128ull << 20;
constexpr size_t kCopyPartsInFlight = 4;

// Copies trees and chunks of one run, remembering each source id's
// destination id so that what several snapshots share is read once.
class SnapshotCopier {
 public:
  SnapshotCopier(Repository& from, Repository& to, const CopyOptions& options, CopyProgress& progress)
      : from_(from),
        to_(to),
        options_(options),
        progress_(progress),
        index_(to.catalog(), to.keys()),
        output_(to.content(), to.config().pack_size, to.config().part_size, kCopyPartsInFlight),
        writer_(output_.writer()) {}

  // Records the ids of an earlier copy: `copied` is `source`'s copy, entry
  // for entry. A pair that does not match (it cannot, unless the
  // destination was changed by other means) teaches nothing.
  void learn(const Id& source, const Id& copied) {
    std::vector<std::pair<Id, Id>> stack{{source, copied}};
    while (!stack.empty()) {
      auto [src, dst] = stack.back();
      stack.pop_back();
      if (trees_.count(src)) continue;
      Tree a = from_.load_tree(src);
      Tree b = to_.load_tree(dst);
      if (!same_shape(a, b)) continue;
      trees_[src] = dst;
      for (size_t i = 0; i < a.entries.size(); ++i) {
        const TreeEntry& x = a.entries[i];
        const TreeEntry& y = b.entries[i];
        if (x.meta.type == NodeType::kDir) stack.emplace_back(x.subtree, y.subtree);
        for (size_t k = 0; k < x.content.size(); ++k) {
          if (!x.content[k].hole) chunks_[x.content[k].chunk] = y.content[k].chunk;
        }
      }
    }
  }

  // The destination id of source tree `source` at `path`, storing what the
  // destination lacks.
  Id copy_tree(const Id& source, const std::string& path) {
    if (options_.cancel && options_.cancel->load()) throw Error(ErrorKind::kInterrupted, "copy interrupted");
    if (auto it = trees_.find(source); it != trees_.end() && index_.contains(it->second)) return it->second;
    Tree tree = from_.load_tree(source);
    for (TreeEntry& e : tree.entries) {
      if (e.meta.type == NodeType::kDir) e.subtree = copy_tree(e.subtree, path + "/" + e.meta.name);
    }
    fetch_chunks(tree, path);
    for (TreeEntry& e : tree.entries) {
      for (ContentRef& ref : e.content) {
        if (!ref.hole) ref.chunk = chunks_.at(ref.chunk);
      }
    }
    Bytes body = tree.encode();
    Id id = chunk_id(to_, body);
    if (index_.claim(id)) {
      Bytes sealed;
      seal_tree(to_, id, body, sealed);
      writer_.add(catalog::BlobType::kTree, id, static_cast<uint32_t>(body.size()), sealed);
      to_.cache_tree(id, body);
      ++trees_sent_;
      progress_.bytes_sent += sealed.size();
    }
    trees_[source] = id;
    return id;
  }

  // Waits until every pack is committed to the destination's index; returns
  // the packs committed since the last call (for the change log).
  std::vector<LoggedPack> flush() {
    writer_.flush();
    return writer_.take_committed();
  }

  void add_to(CopyResult& result) const {
    result.chunks_read = progress_.chunks_read;
    result.bytes_read = progress_.bytes_read;
    result.chunks_sent = progress_.chunks_sent;
    result.bytes_sent = progress_.bytes_sent;
    result.trees_sent = trees_sent_;
    result.chunks_reused = chunks_reused_;
    result.packs_written = writer_.packs_committed();
  }

 private:
  static bool same_shape(const Tree& a, const Tree& b) {
    if (a.entries.size() != b.entries.size()) return false;
    for (size_t i = 0; i < a.entries.size(); ++i) {
      const TreeEntry& x = a.entries[i];
      const TreeEntry& y = b.entries[i];
      if (x.meta.name != y.meta.name || x.meta.type != y.meta.type || x.content.size() != y.content.size() ||
          x.file_hash != y.file_hash) {
        return false;
      }
      for (size_t k = 0; k < x.content.size(); ++k) {
        if (x.content[k].hole != y.content[k].hole || x.content[k].length != y.content[k].length) return false;
      }
    }
    return true;
  }

  // Reads from the source every chunk of the tree's files whose copy the
  // destination lacks, and stores it there.
  void fetch_chunks(const Tree& tree, const std::string& path) {
    std::vector<Id> wanted;
    std::unordered_map<Id, std::string, IdHash> file_of;  // for errors
    for (const TreeEntry& e : tree.entries) {
      for (const ContentRef& ref : e.content) {
        if (ref.hole) continue;
        auto mapped = chunks_.find(ref.chunk);
        if (mapped != chunks_.end() && index_.contains(mapped->second)) {
          ++chunks_reused_;
          continue;
        }
        if (file_of.emplace(ref.chunk, path + "/" + e.meta.name).second) wanted.push_back(ref.chunk);
      }
    }
    if (wanted.empty()) return;

    std::vector<catalog::BlobLocation> locations;
    locations.reserve(wanted.size());
    std::vector<std::optional<catalog::BlobLocation>> found = from_.catalog().find_blobs(wanted);
    for (size_t i = 0; i < wanted.size(); ++i) {
      if (!found[i]) {
        throw Error(ErrorKind::kIntegrity, "chunk " + wanted[i].short_hex() + " of " + file_of[wanted[i]] + " is in no pack of " +
                                               from_.target().describe() + " (run keel check there)");
      }
      locations.push_back(std::move(*found[i]));
    }

    struct Sink : BlobSink {
      SnapshotCopier& copier;
      std::span<const catalog::BlobLocation> blobs;
      std::mutex mu;
      std::optional<Error> error;
      Sink(SnapshotCopier& c, std::span<const catalog::BlobLocation> b) : copier(c), blobs(b) {}
      void deliver(size_t i, ByteView plain) override { copier.store_chunk(blobs[i].blob.id, plain); }
      void fail(size_t, const Error& e) override {
        std::lock_guard lock(mu);
        if (!error) error = e;
      }
    } sink(*this, locations);
    ReadOptions read{.form = BlobForm::kOpened, .memory_budget = kReadBudget, .cancel = options_.cancel};
    from_.content().read(locations, plan_reads(locations, kCoalesceGap, kMaxRead), read, sink);
    if (sink.error) {
      throw Error(sink.error->kind(), std::string(sink.error->what()) + " (while copying " + path + " from " +
                                          from_.target().describe() + "; nothing of this snapshot was recorded)");
    }
  }

  // On a reader thread: one source chunk's plaintext.
  void store_chunk(const Id& source, ByteView plain) {
    Id id = chunk_id(to_, plain);
    ++progress_.chunks_read;
    progress_.bytes_read += plain.size();
    {
      std::lock_guard lock(mu_);
      chunks_[source] = id;
    }
    if (!index_.claim(id)) {
      std::lock_guard lock(mu_);
      ++chunks_reused_;
      return;
    }
    thread_local Bytes sealed;
    seal_chunk(to_, id, plain, to_.config().compression_level, sealed);
    writer_.add(catalog::BlobType::kData, id, static_cast<uint32_t>(plain.size()), sealed);
    ++progress_.chunks_sent;
    progress_.bytes_sent += sealed.size();
  }

  Repository& from_;
  Repository& to_;
  const CopyOptions& options_;
  CopyProgress& progress_;
  BlobIndex index_;
  std::mutex mu_;  // chunks_ and chunks_reused_ while readers deliver
  std::unordered_map<Id, Id, IdHash> trees_;
  std::unordered_map<Id, Id, IdHash> chunks_;
  uint64_t chunks_reused_ = 0;
  uint64_t trees_sent_ = 0;
  PackOutput output_;
  ContentWriter& writer_;
};

bool same_source(const catalog::SnapshotRecord& a, const catalog::SnapshotRecord& b) {
  return a.host == b.host && a.paths == b.paths;
}

}  // namespace

Id copy_snapshot_id(const Repository& from, const Repository& to, const Id& snapshot) {
  static constexpr std::string_view kLabel = "keel copy of snapshot";
  Bytes input(kLabel.begin(), kLabel.end());
  input.insert(input.end(), from.config().repository_id.view().begin(), from.config().repository_id.view().end());
  input.insert(input.end(), snapshot.view().begin(), snapshot.view().end());
  return keyed_id(to.keys().id, input);
}

CopyResult copy_snapshots(Repository& from, Repository& to, const CopyOptions& options, CopyProgress& progress) {
  if (from.config().repository_id == to.config().repository_id) {
    throw Error(ErrorKind::kUsage, "source and destination are the same repository (" + to.target().describe() + ")");
  }
  // Tells a prune of the destination that this run may use any pack it
  // indexes now (as a backup does, backup.cc).
  std::optional<Lease> running;
  if (!options.dry_run) running.emplace(to.target(), to.keys().index, kRunningPrefix);
  from.sync_catalog();
  to.sync_catalog();

  std::vector<catalog::SnapshotRecord> all = from.catalog().list_snapshots();
  for (const Id& wanted : options.snapshots) {
    if (std::none_of(all.begin(), all.end(), [&](const auto& s) { return s.id == wanted; })) {
      throw Error(ErrorKind::kNotFound, "no snapshot " + wanted.short_hex() + " in " + from.target().describe());
    }
  }
  auto copy_of = [&](const catalog::SnapshotRecord& s) -> std::optional<catalog::SnapshotRecord> {
    return to.catalog().get_snapshot(copy_snapshot_id(from, to, s.id));
  };

  CopyResult result;
  std::optional<SnapshotCopier> copier;
  for (const catalog::SnapshotRecord& s : all) {
    if (!options.selection.matches(s)) continue;
    if (!options.snapshots.empty() &&
        std::find(options.snapshots.begin(), options.snapshots.end(), s.id) == options.snapshots.end()) {
      continue;
    }
    CopiedSnapshot done{s, copy_snapshot_id(from, to, s.id), copy_of(s).has_value()};
    if (done.existed || options.dry_run) {
      result.snapshots.push_back(std::move(done));
      continue;
    }
    if (!copier) copier.emplace(from, to, options, progress);
    // The newest earlier snapshot of the same host and paths that was
    // copied already maps what this one did not change.
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (it->time_ns > s.time_ns || it->id == s.id || !same_source(*it, s)) continue;
      if (std::optional<catalog::SnapshotRecord> earlier = copy_of(*it)) {
        copier->learn(it->root, earlier->root);
        break;
      }
    }
    catalog::SnapshotRecord record = s;
    record.id = done.copy;
    record.root = copier->copy_tree(s.root, "");
    record.parent.reset();
    if (s.parent) {
      auto parent = std::find_if(all.begin(), all.end(), [&](const auto& p) { return p.id == *s.parent; });
      if (parent != all.end() && copy_of(*parent)) record.parent = copy_snapshot_id(from, to, *s.parent);
    }
    std::vector<LoggedPack> packs = copier->flush();
    running->check_held();
    to.save_snapshot(record, std::move(packs));
    ++progress.snapshots_done;
    result.snapshots.push_back(std::move(done));
  }
  if (copier) copier->add_to(result);
  return result;
}

}  // namespace keel::engine
