// The dedupe index of one backup run: every blob id the catalog knows
// outside condemned packs (those a prune may delete), plus those claimed by
// this run and still on their way to the target. claim() is the single
// place that decides whether a blob must be stored.
#pragma once

#include <mutex>
#include <unordered_set>

#include "catalog/catalog.h"
#include "util/id.h"

namespace keel::engine {

class BlobIndex {
 public:
  explicit BlobIndex(catalog::Catalog& catalog);

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
