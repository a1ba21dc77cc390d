#include "engine/check.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/pack.h"
#include "engine/restore.h"
#include "util/checksum.h"
#include "util/error.h"

namespace keel::engine {
namespace {

constexpr uint64_t kReadChunk = 16ull << 20;

// Reads one pack front to back in blob-aligned ranges; returns the ids of
// blobs whose bytes do not match their checksum, and problems found.
void scrub_pack(Repository& repo, const catalog::PackRecord& pack, std::vector<Id>& bad_blobs,
                std::vector<std::string>& problems, uint64_t& bytes_read) {
  std::string where = "pack " + pack.id.hex() + " on " + repo.target().describe();
  std::vector<catalog::BlobRecord> blobs = repo.catalog().blobs_in_pack(pack.id);
  std::sort(blobs.begin(), blobs.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  Xxh3Stream hash;
  Bytes buf;
  uint64_t pos = 0;
  size_t next_blob = 0;
  std::string key = pack_key(pack.id);
  while (pos < pack.size) {
    // Extend the range over whole blobs up to kReadChunk (at least one).
    uint64_t end = pos;
    while (next_blob < blobs.size() && (end == pos || blobs[next_blob].offset + blobs[next_blob].stored_length - pos <= kReadChunk)) {
      end = blobs[next_blob].offset + blobs[next_blob].stored_length;
      ++next_blob;
    }
    if (next_blob == blobs.size() && end - pos < kReadChunk) end = std::min(pack.size, pos + kReadChunk);
    if (end <= pos) end = std::min(pack.size, pos + kReadChunk);
    buf.resize(end - pos);
    size_t n = repo.target().get_range(key, pos, buf);
    bytes_read += n;
    if (n != buf.size()) {
      problems.push_back(where + ": truncated at offset " + std::to_string(pos + n) + " (index says " +
                         std::to_string(pack.size) + " bytes)");
      return;
    }
    hash.update(buf);
    for (const catalog::BlobRecord& b : blobs) {
      if (b.offset < pos || b.offset + b.stored_length > end) continue;
      if (xxh3_64(ByteView(buf.data() + (b.offset - pos), b.stored_length)) != b.xxh3) {
        problems.push_back(where + ": checksum mismatch in blob " + b.id.short_hex() + " at offset " +
                           std::to_string(b.offset));
        bad_blobs.push_back(b.id);
      }
    }
    pos = end;
  }
  if (pack.xxh3_128.size() == 16) {
    Hash128 digest = hash.digest();
    if (!std::equal(digest.begin(), digest.end(), pack.xxh3_128.begin()) && bad_blobs.empty()) {
      problems.push_back(where + ": pack checksum mismatch outside its blobs (header or trailer damaged)");
    }
  }
  try {
    std::vector<catalog::BlobRecord> header = read_pack_header(repo.target(), repo.keys().data, pack.id, pack.size);
    if (header.size() != blobs.size()) problems.push_back(where + ": header lists a different set of blobs than the index");
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
}

}  // namespace

CheckResult run_check(Repository& repo, const CheckOptions& options,
                      const std::function<void(uint64_t, uint64_t)>& on_progress) {
  CheckResult result;
  repo.sync_catalog();
  std::vector<catalog::PackRecord> packs = repo.catalog().list_packs();
  result.packs = packs.size();

  std::unordered_map<Id, uint64_t, IdHash> on_target;
  repo.target().list("packs/", [&](const targets::ObjectInfo& o) {
    std::string name = o.key.substr(o.key.rfind('/') + 1);
    try {
      on_target[Id::from_hex(name)] = o.size;
    } catch (const Error&) {
    }
  });
  std::set<Id> missing_packs;
  for (const auto& p : packs) {
    auto it = on_target.find(p.id);
    if (it == on_target.end()) {
      result.problems.push_back({"pack " + p.id.hex() + " is missing from " + repo.target().describe(), {}});
      missing_packs.insert(p.id);
    } else if (it->second != p.size) {
      result.problems.push_back({"pack " + p.id.hex() + " on " + repo.target().describe() + " has " +
                                     std::to_string(it->second) + " bytes, index says " + std::to_string(p.size),
                                 {}});
    }
  }

  // Every snapshot's trees and chunks must be indexed.
  std::vector<catalog::SnapshotRecord> snapshots = repo.catalog().list_snapshots();
  result.snapshots = snapshots.size();
  std::unordered_set<Id, IdHash> referenced;
  // Chunks seen for the first time, with where: looked up in batches.
  std::vector<Id> unchecked;
  std::vector<std::string> first_uses;
  auto look_up_unchecked = [&] {
    std::vector<std::optional<catalog::BlobLocation>> locations = repo.catalog().find_blobs(unchecked);
    for (size_t i = 0; i < unchecked.size(); ++i) {
      if (locations[i]) continue;
      result.problems.push_back({"chunk " + unchecked[i].short_hex() + " is not in the index (no pack on the target holds it)",
                                 {first_uses[i]}});
    }
    unchecked.clear();
    first_uses.clear();
  };
  std::set<Id> seen_trees;
  for (const auto& snap : snapshots) {
    try {
      walk_snapshot(repo, snap, "/", [&](const std::string& path, const TreeEntry& e) {
        if (e.meta.type == NodeType::kDir && seen_trees.insert(e.subtree).second) ++result.trees;
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

  if (options.read_data) {
    std::mutex mu;
    std::vector<Id> bad_blobs;
    std::atomic<size_t> next{0};
    std::atomic<uint64_t> done{0};
    std::vector<std::thread> threads;
    for (size_t t = 0; t < std::max<size_t>(1, options.readers); ++t) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < packs.size(); i = next++) {
          if (options.cancel && options.cancel->load()) return;
          if (missing_packs.count(packs[i].id)) continue;
          std::vector<Id> bad;
          std::vector<std::string> problems;
          uint64_t bytes = 0;
          try {
            scrub_pack(repo, packs[i], bad, problems, bytes);
          } catch (const Error& e) {
            problems.push_back(e.what());
          }
          std::lock_guard lock(mu);
          result.bytes_read += bytes;
          bad_blobs.insert(bad_blobs.end(), bad.begin(), bad.end());
          for (auto& p : problems) result.problems.push_back({p, {}});
          if (on_progress) on_progress(++done, packs.size());
        }
      });
    }
    for (auto& t : threads) t.join();
    if (options.cancel && options.cancel->load()) throw Error(ErrorKind::kInterrupted, "check interrupted");

    // Name the files each damaged blob belongs to.
    if (!bad_blobs.empty()) {
      std::unordered_map<Id, std::vector<std::string>, IdHash> affected;
      for (const Id& id : bad_blobs) affected[id];
      for (const auto& snap : snapshots) {
        walk_snapshot(repo, snap, "/", [&](const std::string& path, const TreeEntry& e) {
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
