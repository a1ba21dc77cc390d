#include "engine/live_blobs.h"

#include <algorithm>
#include <bit>
#include <unordered_map>

#include "util/error.h"

namespace keel::engine {
namespace {

// Rows per bucket on average: a lookup compares a handful of ids.
constexpr uint64_t kRowsPerBucket = 8;

uint32_t leading_bits(const Id& id) {
  return uint32_t{id.bytes[0]} << 24 | uint32_t{id.bytes[1]} << 16 | uint32_t{id.bytes[2]} << 8 | id.bytes[3];
}

}  // namespace

LiveBlobs::LiveBlobs(catalog::Catalog& catalog, const std::vector<catalog::PackRecord>& packs)
    : pack_count_(packs.size()) {
  std::unordered_map<Id, uint32_t, IdHash> pack_numbers;
  for (size_t i = 0; i < packs.size(); ++i) {
    pack_numbers.emplace(packs[i].id, static_cast<uint32_t>(i));
    in_use_.push_back(!packs[i].condemned_unix);
  }
  // A little room for rows another process adds meanwhile, so the array is
  // not reallocated (which would need twice its memory for a moment).
  uint64_t expected = catalog.blob_count();
  rows_.reserve(expected + expected / 64 + 16);
  bool sorted = true;
  catalog.for_each_blob_location([&](const catalog::BlobLocation& loc) {
    auto it = pack_numbers.find(loc.pack);
    if (!rows_.empty() && loc.blob.id < rows_.back().id) sorted = false;
    rows_.push_back(Row{loc.blob.id, it == pack_numbers.end() ? kNoPack : it->second, loc.blob.stored_length});
  });
  // Stable: copies of one blob stay in the order the catalog indexed them.
  if (!sorted) std::stable_sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.id < b.id; });
  bits_.assign((rows_.size() + 63) / 64, 0);

  uint64_t buckets = std::bit_floor(std::max<uint64_t>(rows_.size() / kRowsPerBucket, 1));
  bucket_bits_ = std::countr_zero(buckets);
  buckets_.assign(buckets + 1, 0);
  size_t row = 0;
  for (uint64_t b = 0; b < buckets; ++b) {
    buckets_[b] = static_cast<uint32_t>(row);
    while (row < rows_.size() && bucket_of(rows_[row].id) == b) ++row;
  }
  buckets_[buckets] = static_cast<uint32_t>(rows_.size());
}

uint32_t LiveBlobs::bucket_of(const Id& id) const {
  return bucket_bits_ == 0 ? 0 : leading_bits(id) >> (32 - bucket_bits_);
}

std::optional<size_t> LiveBlobs::find(const Id& id) const {
  uint32_t b = bucket_of(id);
  auto first = rows_.begin() + buckets_[b], last = rows_.begin() + buckets_[b + 1];
  auto it = std::lower_bound(first, last, id, [](const Row& r, const Id& v) { return r.id < v; });
  if (it == last || it->id != id) return std::nullopt;
  // The kept copy: the first in a pack in use, else the first.
  for (auto copy = it; copy != last && copy->id == id; ++copy) {
    if (copy->pack != kNoPack && in_use_[copy->pack]) return static_cast<size_t>(copy - rows_.begin());
  }
  return static_cast<size_t>(it - rows_.begin());
}

bool LiveBlobs::set_mark(size_t row) {
  uint64_t bit = uint64_t{1} << (row % 64);
  if (bits_[row / 64] & bit) return false;
  bits_[row / 64] |= bit;
  ++live_count_;
  return true;
}

void LiveBlobs::mark(Repository& repo, const catalog::SnapshotRecord& snapshot) {
  std::vector<Id> pending{snapshot.root};
  while (!pending.empty()) {
    Id tree_id = pending.back();
    pending.pop_back();
    std::optional<size_t> row = find(tree_id);
    bool first_visit = row ? set_mark(*row) : unindexed_trees_.insert(tree_id).second;
    if (!first_visit) continue;
    Tree tree;
    try {
      tree = repo.load_tree(tree_id);
    } catch (const Error& e) {
      throw Error(e.kind(), "snapshot " + snapshot.id.short_hex() + ": cannot read tree " + tree_id.short_hex() + " (" +
                                e.what() + "); prune needs every tree to know which data is in use: run keel check");
    }
    ++trees_walked_;
    for (const TreeEntry& entry : tree.entries) {
      if (entry.meta.type == NodeType::kDir) pending.push_back(entry.subtree);
      for (const ContentRef& ref : entry.content) {
        if (!ref.hole) mark_chunk(ref.chunk);
      }
    }
  }
}

void LiveBlobs::mark_chunk(const Id& chunk) {
  if (std::optional<size_t> row = find(chunk)) {
    set_mark(*row);
  } else {
    ++unindexed_;
  }
}

bool LiveBlobs::live(const Id& blob) const {
  std::optional<size_t> row = find(blob);
  return !row || marked(*row);
}

bool LiveBlobs::live_in(const Id& blob, size_t pack) const {
  std::optional<size_t> row = find(blob);
  return !row || (marked(*row) && rows_[*row].pack == pack);
}

std::vector<LiveBlobs::PackUse> LiveBlobs::pack_use() const {
  std::vector<PackUse> use(pack_count_);
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    if (r.pack == kNoPack) continue;
    PackUse& u = use[r.pack];
    ++u.blobs;
    if (marked(i)) {
      ++u.live_blobs;
      u.live_bytes += r.stored_length;
    }
  }
  return use;
}

uint64_t LiveBlobs::memory_bytes() const {
  // A std::set node holds the id plus about 32 bytes of links and colour.
  return rows_.capacity() * sizeof(Row) + bits_.capacity() * sizeof(uint64_t) +
         buckets_.capacity() * sizeof(uint32_t) + unindexed_trees_.size() * (sizeof(Id) + 32);
}

}  // namespace keel::engine
