// Prune's mark phase: which indexed blobs some snapshot still needs.
//
// The catalog's blob rows are loaded in id order into one flat array (id,
// pack, stored length: 40 bytes a blob), with a mark bit per row and a
// bucket table on the ids' leading bits (about half a byte a blob) that
// narrows each lookup to a few rows. No hash set of 32-byte ids, whose nodes
// alone would cost twice that. Marking walks every snapshot's trees; trees
// are content-addressed and shared between snapshots, so a tree already
// marked is not walked again.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "catalog/catalog.h"
#include "engine/repository.h"

namespace keel::engine {

class LiveBlobs {
 public:
  // Loads every blob row of the catalog. Packs are numbered by their
  // position in `packs`; rows of packs not in it (added meanwhile by another
  // process) can be marked but count for no pack. A blob stored in several
  // packs has a row for each; marking it marks one copy, the one kept (in a
  // pack in use where there is one), and the others count as dead.
  LiveBlobs(catalog::Catalog& catalog, const std::vector<catalog::PackRecord>& packs);

  // Marks the snapshot's trees and the chunks they reference. Throws if a
  // tree cannot be read: a prune that cannot see every reference must not
  // delete anything.
  void mark(Repository& repo, const catalog::SnapshotRecord& snapshot);

  // Marks a chunk used outside snapshots (PruneOptions::extra_roots).
  void mark_chunk(const Id& chunk);

  // Whether a snapshot marked so far references `blob`. Blobs that were not
  // loaded count as live: this scan knows nothing of them.
  bool live(const Id& blob) const;
  // Whether `blob` is live and its kept copy is the one in pack number
  // `pack` (unknown blobs count as live everywhere).
  bool live_in(const Id& blob, size_t pack) const;

  struct PackUse {
    uint64_t blobs = 0;
    uint64_t live_blobs = 0;
    uint64_t live_bytes = 0;  // stored bytes of the live blobs
  };
  // Per pack, by position in the `packs` given to the constructor.
  std::vector<PackUse> pack_use() const;

  uint64_t blobs() const { return rows_.size(); }
  uint64_t live_blobs() const { return live_count_; }
  uint64_t trees_walked() const { return trees_walked_; }
  // Chunks referenced by marked snapshots that no loaded row holds.
  uint64_t unindexed_references() const { return unindexed_; }
  // Bytes this structure holds: what prune's memory grows by per blob.
  uint64_t memory_bytes() const;

 private:
  struct Row {
    Id id;
    uint32_t pack;
    uint32_t stored_length;
  };
  static_assert(sizeof(Row) == 40);
  static constexpr uint32_t kNoPack = UINT32_MAX;

  std::optional<size_t> find(const Id& id) const;
  bool marked(size_t row) const { return (bits_[row / 64] >> (row % 64)) & 1; }
  // Sets the mark; false if it was set already.
  bool set_mark(size_t row);
  uint32_t bucket_of(const Id& id) const;

  size_t pack_count_;
  std::vector<bool> in_use_;  // per pack: not condemned
  std::vector<Row> rows_;
  std::vector<uint64_t> bits_;
  std::vector<uint32_t> buckets_;  // rows of bucket b: [buckets_[b], buckets_[b + 1])
  int bucket_bits_ = 0;
  std::set<Id> unindexed_trees_;   // walked though no row holds them (rare)
  uint64_t live_count_ = 0;
  uint64_t trees_walked_ = 0;
  uint64_t unindexed_ = 0;
};

}  // namespace keel::engine
