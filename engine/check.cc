#include "engine/check.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "engine/condemnation.h"
#include "engine/content.h"
#include "engine/keys.h"
#include "engine/object_lock.h"
#include "engine/pack.h"
#include "engine/restore.h"
#include "engine/sealed_object.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace keel::engine {

std::vector<DamagedObject> find_damaged_records(Repository& repo) {
  std::vector<DamagedObject> damaged;
  for (const Id& id : list_object_ids(repo.target(), "snapshots/")) {
    try {
      repo.read_snapshot(id);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      damaged.push_back({snapshot_key(id), e.what()});
    }
  }
  // Not written by keel's key (append-only credentials may create one):
  // every sync skips them, repair moves them aside.
  list_condemnations(repo.target(), repo.keys().index,
                     [&](const std::string& key, const std::string& why) { damaged.push_back({key, why}); });
  // The slot that opened the repository is intact by definition; others
  // carry a checksum that tells damage from another password.
  std::vector<std::string> slots;
  repo.target().list("keys/", [&](const targets::ObjectInfo& o) { slots.push_back(o.key); });
  for (const std::string& key : slots) {
    try {
      read_key_slot_info(repo.target().get(key), repo.target().describe() + "/" + key);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      damaged.push_back({key, e.what()});
    }
  }
  return damaged;
}

namespace {

// Reads and authenticates a tree: nullopt, or why it cannot be read
// (kIntegrity or kNotFound; other errors, such as a target that cannot be
// reached, end the check).
std::optional<Error> read_tree(Repository& repo, const Id& tree) {
  try {
    Tree::decode(repo.read_blob(tree), "tree " + tree.short_hex());
    return std::nullopt;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity && e.kind() != ErrorKind::kNotFound) throw;
    return e;
  }
}

// Walks a snapshot's trees (walk_snapshot); stops, and no problem, where
// other hosts forgot and pruned the snapshot since this check synced.
void walk_unless_forgotten(Repository& repo, const catalog::SnapshotRecord& snap,
                           const std::function<void(const std::string& path, const TreeEntry& entry)>& fn) {
  try {
    walk_snapshot(repo, snap, "/", fn);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound || repo.target().head(snapshot_key(snap.id))) throw;
  }
}

CheckProblem tree_problem(const Id& tree, const std::string& first_use, const std::string& why) {
  return {"tree " + tree.short_hex() + ": " + why, {first_use + " (directory listing)"}};
}

// What check did not find: chunks not in the index and trees that could
// not be read (with --read-data), each with where it is first used.
struct Unfound {
  std::map<Id, std::string> chunks;
  std::map<Id, std::string> trees;
  bool empty() const { return chunks.empty() && trees.empty(); }
};

// A forget and a prune on other hosts delete what a snapshot used while this
// check runs (with --grace 0, at once). So after a sync, each chunk and tree
// not found is looked for again if a snapshot on the target still uses it,
// and reported if it is still missing. Reading a tree again can meet another
// such prune: three rounds at most for trees.
void report_unfound(Repository& repo, Unfound unfound, CheckResult& result) {
  std::map<Id, std::string> chunks;                            // unindexed, first use (one look-up)
  std::map<Id, std::pair<std::string, std::string>> trees;     // still unreadable, first use and why
  for (int round = 0; round < 3 && !unfound.empty(); ++round) {
    repo.sync_catalog();
    std::unordered_set<Id, IdHash> used;  // every tree, and the chunks not found
    bool all_walked = true;  // else each is looked for again
    for (const catalog::SnapshotRecord& snap : repo.catalog().list_snapshots()) {
      used.insert(snap.root);
      try {
        walk_unless_forgotten(repo, snap, [&](const std::string&, const TreeEntry& e) {
          if (e.meta.type == NodeType::kDir) used.insert(e.subtree);
          for (const ContentRef& ref : e.content) {
            if (!ref.hole && unfound.chunks.count(ref.chunk)) used.insert(ref.chunk);
          }
        });
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kIntegrity && e.kind() != ErrorKind::kNotFound) throw;
        all_walked = false;  // damaged, which the first walk reported
      }
    }
    auto still_used = [&](const Id& id) { return !all_walked || used.count(id) > 0; };
    Unfound again;
    std::vector<Id> look_up;
    for (const auto& [chunk, first_use] : unfound.chunks) {
      if (still_used(chunk)) look_up.push_back(chunk);
    }
    const std::vector<std::optional<catalog::BlobLocation>> found = repo.catalog().find_blobs(look_up);
    for (size_t i = 0; i < look_up.size(); ++i) {
      if (!found[i]) chunks[look_up[i]] = unfound.chunks[look_up[i]];  // the synced index is the answer
    }
    for (const auto& [tree, first_use] : unfound.trees) {
      trees.erase(tree);
      if (!still_used(tree)) continue;
      if (std::optional<Error> e = read_tree(repo, tree)) {
        trees[tree] = {first_use, e->what()};
        if (e->kind() == ErrorKind::kNotFound) again.trees.emplace(tree, first_use);
      }
    }
    unfound = std::move(again);
  }
  for (const auto& [chunk, first_use] : chunks) {
    result.problems.push_back({"chunk " + chunk.short_hex() + " is not in the index (no pack on the target holds it)",
                               {first_use}});
  }
  for (const auto& [tree, why] : trees) {
    result.problems.push_back(tree_problem(tree, why.first, why.second));
  }
}

}  // namespace

CheckResult run_check(Repository& repo, const CheckOptions& options,
                      const std::function<void(uint64_t, uint64_t)>& on_progress) {
  if (options.read_data) repo.require_full_key("check --read-data");
  CheckResult result;
  // A prune on another host deletes packs (after moving what snapshots still
  // use) while this check syncs and lists them: a pack the index has and the
  // listing lacks is remembered with its blobs, and the catalog synced again,
  // which drops it; it is reported below only if a snapshot still uses one of
  // its blobs that no other pack holds. The listing is the authority.
  std::vector<catalog::PackRecord> packs;
  std::unordered_map<Id, uint64_t, IdHash> on_target;
  std::map<Id, std::vector<Id>> missing_packs;  // with their blobs
  bool all_listed = false;
  for (int attempt = 0; attempt < 3 && !all_listed; ++attempt) {
    repo.sync_catalog();
    packs = repo.catalog().list_packs();
    on_target.clear();
    repo.target().list("packs/", [&](const targets::ObjectInfo& o) {
      if (std::optional<Id> id = id_from_key(o.key)) on_target[*id] = o.size;
    });
    all_listed = true;
    for (const auto& p : packs) {
      if (on_target.count(p.id)) continue;
      all_listed = false;
      std::vector<Id>& blobs = missing_packs[p.id];
      if (blobs.empty()) {
        for (const catalog::BlobRecord& b : repo.catalog().blobs_in_pack(p.id)) blobs.push_back(b.id);
      }
    }
  }
  if (!all_listed) {
    repo.sync_catalog();  // also indexes the packs a repack wrote before the listing
    packs = repo.catalog().list_packs();
    std::erase_if(packs, [&](const auto& p) { return !on_target.count(p.id); });
  }
  result.packs = packs.size();
  result.blobs_stored_more_than_once = repo.catalog().blobs_stored_more_than_once();

  for (const auto& p : packs) {
    auto it = on_target.find(p.id);
    if (it->second != p.size) {
      result.problems.push_back({"pack " + p.id.hex() + " on " + repo.target().describe() + " has " +
                                     std::to_string(it->second) + " bytes, index says " + std::to_string(p.size),
                                 {}});
    }
  }

  // Packs the sync could not index: their header does not authenticate.
  std::unordered_set<Id, IdHash> indexed;
  for (const auto& p : packs) indexed.insert(p.id);
  for (const auto& [id, size] : on_target) {
    if (indexed.count(id)) continue;
    try {
      read_pack_header(repo.target(), repo.keys(), id, size);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kNotFound) continue;  // deleted since the listing, by a prune elsewhere
      if (e.kind() != ErrorKind::kIntegrity) throw;
      result.problems.push_back({"pack " + id.hex() + " is damaged and cannot be indexed: " + e.what(), {}});
    }
  }

  // Whether or not this catalog knows them.
  for (const DamagedObject& d : find_damaged_records(repo)) result.problems.push_back({d.key + " is damaged: " + d.reason, {}});
  // Object Lock: each snapshot and what it uses locked as long as it needs.
  for (std::string& problem : find_short_retention(repo)) result.problems.push_back({std::move(problem), {}});

  // Every snapshot's trees and chunks must be indexed.
  std::vector<catalog::SnapshotRecord> snapshots = repo.catalog().list_snapshots();
  result.snapshots = snapshots.size();
  std::unordered_set<Id, IdHash> referenced;
  // Chunks seen for the first time, with where: looked up in batches.
  std::vector<Id> unchecked;
  std::vector<std::string> first_uses;
  Unfound unfound;
  auto look_up_unchecked = [&] {
    std::vector<std::optional<catalog::BlobLocation>> locations = repo.catalog().find_blobs(unchecked);
    for (size_t i = 0; i < unchecked.size(); ++i) {
      if (!locations[i]) unfound.chunks.emplace(unchecked[i], first_uses[i]);
    }
    unchecked.clear();
    first_uses.clear();
  };
  // Trees with where they are first used: with read_data, each is read
  // from its pack and authenticated (the catalog caches their bodies).
  std::map<Id, std::string> seen_trees;
  for (const auto& snap : snapshots) {
    // A put-only key cannot open trees: it checks packs, their headers and
    // the snapshot headers only.
    if (repo.put_only()) break;
    if (seen_trees.emplace(snap.root, snap.id.short_hex() + ":/").second) ++result.trees;
    try {
      walk_unless_forgotten(repo, snap, [&](const std::string& path, const TreeEntry& e) {
        if (e.meta.type == NodeType::kDir && seen_trees.emplace(e.subtree, snap.id.short_hex() + ":" + path).second) {
          ++result.trees;
        }
        for (const ContentRef& ref : e.content) {
          if (ref.hole || !referenced.insert(ref.chunk).second) continue;
          unchecked.push_back(ref.chunk);
          first_uses.push_back(snap.id.short_hex() + ":" + path);
          if (unchecked.size() == 4096) look_up_unchecked();
        }
      });
    } catch (const Error& e) {
      result.problems.push_back({"snapshot " + snap.id.short_hex() + ": " + e.what(), {}});
    }
  }
  look_up_unchecked();
  result.blobs_referenced = referenced.size();
  // A missing pack matters if a snapshot uses a blob it held that no pack
  // on the target holds now (the walk above named the files); a put-only key,
  // which cannot walk the trees, names every one.
  for (const auto& [pack, blobs] : missing_packs) {
    if (repo.put_only()) {
      result.problems.push_back({"pack " + pack.hex() + " is missing from " + repo.target().describe(), {}});
      continue;
    }
    std::vector<Id> used;
    std::copy_if(blobs.begin(), blobs.end(), std::back_inserter(used), [&](const Id& b) { return referenced.count(b) > 0; });
    const std::vector<std::optional<catalog::BlobLocation>> found = repo.catalog().find_blobs(used);
    const auto lost = std::count_if(found.begin(), found.end(), [](const auto& l) { return !l.has_value(); });
    if (lost == 0) continue;
    result.problems.push_back({"pack " + pack.hex() + " is missing from " + repo.target().describe() + ": " +
                                   std::to_string(lost) + " chunk(s) that snapshots use were only there",
                               {}});
  }

  if (options.read_data) {
    for (const auto& [tree, first_use] : seen_trees) {
      if (options.cancel && options.cancel->load()) break;
      if (std::optional<Error> e = read_tree(repo, tree)) {
        if (e->kind() == ErrorKind::kNotFound) {
          unfound.trees.emplace(tree, first_use);
        } else {
          result.problems.push_back(tree_problem(tree, first_use, e->what()));
        }
      }
    }
  }
  report_unfound(repo, std::move(unfound), result);

  if (options.read_data) {
    std::mutex mu;
    std::vector<Id> bad_blobs;
    uint64_t done = 0;
    TaskGroup scrubs;
    {
      ThreadPool readers(std::max<size_t>(1, options.readers), std::max<size_t>(1, options.readers));
      for (const catalog::PackRecord& pack : packs) {
        if (options.cancel && options.cancel->load()) break;
        scrubs.started();
        readers.submit(scrubs.wrap([&] {
          if (options.cancel && options.cancel->load()) return;
          PackScrub scrub;
          try {
            scrub = repo.content().scrub(pack);
          } catch (const Error& e) {
            // Deleted meanwhile by a prune elsewhere, which moved its live
            // blobs first: the snapshot walk above found them indexed.
            bool deleted_meanwhile = e.kind() == ErrorKind::kNotFound && !repo.target().head(pack_key(pack.id));
            if (!deleted_meanwhile) scrub.problems.push_back(e.what());
          }
          std::lock_guard lock(mu);
          result.bytes_read += scrub.bytes_read;
          bad_blobs.insert(bad_blobs.end(), scrub.bad_blobs.begin(), scrub.bad_blobs.end());
          for (auto& p : scrub.problems) result.problems.push_back({p, {}});
          if (on_progress) on_progress(++done, packs.size());
        }));
      }
    }
    scrubs.wait();
    if (options.cancel && options.cancel->load()) throw Error(ErrorKind::kInterrupted, "check interrupted");

    // Name the files each damaged blob belongs to.
    if (!bad_blobs.empty()) {
      std::unordered_map<Id, std::vector<std::string>, IdHash> affected;
      for (const Id& id : bad_blobs) affected[id];
      for (const auto& snap : snapshots) {
        walk_unless_forgotten(repo, snap, [&](const std::string& path, const TreeEntry& e) {
          for (const ContentRef& ref : e.content) {
            auto it = affected.find(ref.chunk);
            if (!ref.hole && it != affected.end()) {
              std::string who = snap.id.short_hex() + ":" + path;
              if (it->second.empty() || it->second.back() != who) it->second.push_back(who);
            }
          }
          if (e.meta.type == NodeType::kDir) {
            auto it = affected.find(e.subtree);
            if (it != affected.end()) it->second.push_back(snap.id.short_hex() + ":" + path + "/ (directory listing)");
          }
        });
      }
      for (auto& problem : result.problems) {
        for (auto& [id, files] : affected) {
          if (problem.message.find("blob " + id.short_hex()) != std::string::npos) {
            problem.affected.insert(problem.affected.end(), files.begin(), files.end());
          }
        }
      }
    }
  }
  return result;
}

}  // namespace keel::engine
