#include "engine/repair.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <unordered_set>

#include "engine/content.h"
#include "engine/lease.h"
#include "engine/pack.h"
#include "engine/pack_output.h"
#include "engine/sealed_object.h"
#include "util/error.h"

namespace keel::engine {
namespace {

// Salvage reads and writes as prune's repack does: a few MiB at a time.
constexpr uint64_t kSalvageGap = 256ull << 10;
constexpr uint64_t kSalvageRead = 4ull << 20;
constexpr uint64_t kSalvagePart = 2ull << 20;
constexpr size_t kSalvagePartsInFlight = 4;

class RepairRun {
 public:
  RepairRun(Repository& repo, const RepairOptions& options) : repo_(repo), options_(options) {}

  RepairResult run() {
    std::unique_ptr<Lease> lock;
    if (!options_.dry_run) lock = acquire_lock(repo_.target(), repo_.keys().index);
    repo_.sync_catalog();
    find_damaged_records();
    find_damaged_packs();
    list_lost();
    if (options_.dry_run || result_.damaged.empty()) return std::move(result_);
    salvage();
    for (const DamagedObject& d : result_.damaged) move_aside(d.key);
    repo_.rebuild_catalog();
    return std::move(result_);
  }

 private:
  void check_cancel() {
    if (options_.cancel && options_.cancel->load()) throw Error(ErrorKind::kInterrupted, "repair interrupted");
  }

  void damaged(const std::string& key, const std::string& reason) { result_.damaged.push_back({key, reason}); }

  // Snapshot records and key slots; a damaged snapshot record is lost whole.
  void find_damaged_records() {
    for (DamagedObject& d : engine::find_damaged_records(repo_)) {
      if (d.key.rfind("snapshots/", 0) == 0) {
        result_.lost.push_back(d.key.substr(d.key.find('/') + 1, 8) + ":/ (snapshot record)");
      }
      result_.damaged.push_back(std::move(d));
    }
  }

  // Indexed packs are scrubbed; packs the catalog could not index (their
  // header does not authenticate) are damaged whole.
  void find_damaged_packs() {
    std::map<Id, uint64_t> on_target;
    repo_.target().list("packs/", [&](const targets::ObjectInfo& o) {
      if (std::optional<Id> id = id_from_key(o.key)) on_target[*id] = o.size;
    });
    for (const catalog::PackRecord& pack : repo_.catalog().list_packs()) {
      check_cancel();
      auto it = on_target.find(pack.id);
      if (it == on_target.end()) continue;  // gone: its blobs count as lost below
      on_target.erase(it);
      PackScrub scrub;
      try {
        scrub = repo_.content().scrub(pack);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kIntegrity) throw;
        scrub.problems.push_back(e.what());
      }
      if (scrub.problems.empty()) continue;
      // Only bad blobs: the rest can be salvaged. Anything else (a bad
      // header, a truncation) and the pack is not trusted at all.
      PackDamage& damage = packs_[pack.id];
      damage.whole = scrub.problems.size() != scrub.bad_blobs.size();
      damage.bad_blobs.insert(scrub.bad_blobs.begin(), scrub.bad_blobs.end());
      damaged(pack_key(pack.id), scrub.problems.front() +
                                     (scrub.problems.size() > 1 ? " (and " + std::to_string(scrub.problems.size() - 1) +
                                                                      " more problems)"
                                                                : ""));
    }
    for (const auto& [id, size] : on_target) {
      try {
        read_pack_header(repo_.target(), repo_.keys(), id, size);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kIntegrity) throw;
        packs_[id].whole = true;
        damaged(pack_key(id), e.what());
      }
    }
  }

  bool intact(const Id& pack, const Id& blob) const {
    auto it = packs_.find(pack);
    return it == packs_.end() || (!it->second.whole && !it->second.bad_blobs.count(blob));
  }

  // What no intact copy holds, named by snapshot and path.
  void list_lost() {
    repo_.catalog().for_each_blob_location([&](const catalog::BlobLocation& loc) {
      if (!intact(loc.pack, loc.blob.id)) return;
      available_.insert(loc.blob.id);
      if (!packs_.count(loc.pack)) safe_elsewhere_.insert(loc.blob.id);
    });
    std::unordered_set<Id, IdHash> lost_blobs;
    for (const catalog::SnapshotRecord& snap : repo_.catalog().list_snapshots()) {
      check_cancel();
      walk(snap, snap.root, "", lost_blobs);
    }
    result_.blobs_lost = lost_blobs.size();
  }

  void walk(const catalog::SnapshotRecord& snap, const Id& tree_id, const std::string& dir,
            std::unordered_set<Id, IdHash>& lost_blobs) {
    const std::string where = snap.id.short_hex() + ":" + (dir.empty() ? "/" : dir);
    Tree tree;
    try {
      if (!available_.count(tree_id)) throw Error(ErrorKind::kNotFound, "no intact copy");
      tree = repo_.load_tree(tree_id);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity && e.kind() != ErrorKind::kNotFound) throw;
      lost_blobs.insert(tree_id);
      result_.lost.push_back(where + (dir.empty() ? "" : "/") + " (directory listing: all under it)");
      return;
    }
    for (const TreeEntry& e : tree.entries) {
      std::string path = dir + "/" + e.meta.name;
      if (e.meta.type == NodeType::kDir) {
        walk(snap, e.subtree, path, lost_blobs);
        continue;
      }
      bool lost = false;
      for (const ContentRef& ref : e.content) {
        if (ref.hole || available_.count(ref.chunk)) continue;
        lost_blobs.insert(ref.chunk);
        lost = true;
      }
      if (lost) result_.lost.push_back(snap.id.short_hex() + ":" + path);
    }
  }

  // Copies the intact blobs of damaged packs that no other intact copy
  // holds into new packs, so moving the packs aside loses only the bad ones.
  void salvage() {
    std::vector<catalog::BlobLocation> blobs;
    std::set<Id> taken;
    for (const auto& [pack, damage] : packs_) {
      if (damage.whole) continue;
      for (catalog::BlobRecord& b : repo_.catalog().blobs_in_pack(pack)) {
        if (damage.bad_blobs.count(b.id) || safe_elsewhere_.count(b.id) || !taken.insert(b.id).second) continue;
        blobs.push_back({pack, std::move(b)});
      }
    }
    if (blobs.empty()) return;
    PackOutput output(repo_.content(), repo_.config().pack_size, kSalvagePart, kSalvagePartsInFlight);
    ReadOptions read_options{.readers = 2, .memory_budget = 2 * kSalvageRead, .cancel = options_.cancel};
    // A blob found bad meanwhile is lost, as listed.
    SealedCopy copied = copy_sealed(repo_.content(), blobs, kSalvageGap, kSalvageRead, read_options, output.writer(),
                                    [](const Error&) {});
    output.writer().flush();
    result_.blobs_salvaged = copied.blobs;
  }

  // Copies the object to damaged/<key>, then removes it: nothing is deleted.
  void move_aside(const std::string& key) {
    check_cancel();
    Bytes body;
    try {
      body = repo_.target().get(key);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNotFound) throw;
      return;  // removed meanwhile
    }
    repo_.target().put(damaged_key(key), body);
    repo_.target().remove(key);
  }

  struct PackDamage {
    bool whole = false;
    std::set<Id> bad_blobs;
  };

  Repository& repo_;
  const RepairOptions& options_;
  RepairResult result_;
  std::map<Id, PackDamage> packs_;
  std::unordered_set<Id, IdHash> available_;  // blobs with an intact copy
  std::unordered_set<Id, IdHash> safe_elsewhere_;  // ... in a pack not damaged
};

}  // namespace

std::string damaged_key(const std::string& key) { return "damaged/" + key; }

RepairResult repair(Repository& repo, const RepairOptions& options) { return RepairRun(repo, options).run(); }

}  // namespace keel::engine
