// The dedupe index of one backup run: every blob id the catalog knows
// outside condemned packs (those a prune may delete), plus those claimed by
// this run and still on their way to the target. claim() is the single
// place that decides whether a blob must be stored. A full key of format 2
// counts only blobs in packs vouched for (engine/pack_vouch.h): a chunk
// held only in a pack a put-only key wrote, which may be a false copy, is
// stored again.
#pragma once

#include <mutex>
#include <unordered_set>

#include "catalog/catalog.h"
#include "engine/keys.h"
#include "util/id.h"

namespace keel::engine {

class BlobIndex {
 public:
  BlobIndex(catalog::Catalog& catalog, const MasterKeys& keys);

  // True if `id` was unknown: the caller must now store it. False if it is
  // stored or being stored by someone else already.
  bool claim(const Id& id);
  // True if `id` is stored or being stored: a reference to it may be reused.
  bool contains(const Id& id);
  size_t size();

 private:
  std::mutex mu_;
  std::unordered_set<Id, IdHash> ids_;
};

}  // namespace keel::engine
