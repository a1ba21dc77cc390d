#include "engine/blob_index.h"

namespace keel::engine {

BlobIndex::BlobIndex(catalog::Catalog& catalog, const MasterKeys& keys) {
  ids_.reserve(catalog.blob_count() + 1024);
  const bool vouched_only = keys.format >= 2 && keys.full();
  catalog.for_each_usable_blob([this](const Id& id, catalog::BlobType) { ids_.insert(id); }, vouched_only);
}

bool BlobIndex::claim(const Id& id) {
  std::lock_guard lock(mu_);
  return ids_.insert(id).second;
}

bool BlobIndex::contains(const Id& id) {
  std::lock_guard lock(mu_);
  return ids_.count(id) != 0;
}

size_t BlobIndex::size() {
  std::lock_guard lock(mu_);
  return ids_.size();
}

}  // namespace keel::engine
