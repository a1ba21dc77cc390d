// Copies of the local catalog on the target, so that losing the backup host
// loses no history: the index can always be rebuilt from packs and
// snapshots, but drills and job runs exist only in the catalog.
//
// A copy is catalog/<catalog id>/<unix ns, 20 digits>: the SQLite file,
// cut into frames, each compressed and sealed under the data key (format in
// docs/repository-format.md). Each catalog keeps its newest few copies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/repository.h"

namespace keel::engine {

struct CatalogCopyInfo {
  std::string key;  // on the target
  std::string catalog_id;
  int64_t time_ns = 0;
  uint64_t size = 0;
};

inline constexpr size_t kKeptCopies = 3;
// Append-only access deletes nothing (docs/immutable.md).
inline constexpr size_t kKeepAllCopies = SIZE_MAX;

// Uploads a consistent copy of the repository's catalog and removes this
// catalog's copies beyond the newest `keep`.
CatalogCopyInfo save_catalog_copy(Repository& repo, size_t keep = kKeptCopies);

// Removes each catalog's copies beyond its newest `keep` (only those of
// `catalog_id`, when given), counted from its newest copy that authenticates
// (newer ones that do not go too); under Object Lock a copy stays until its
// lock ends. Prune trims them all, so that copies written append-only (which
// delete nothing) do not pile up. Returns how many were removed.
size_t trim_catalog_copies(Repository& repo, size_t keep, const std::optional<std::string>& catalog_id = std::nullopt);

// For callers whose own work is done and safe (a backup, a drill): a copy
// that fails is worth a warning, not a failure, and the next one tries
// again. Returns why it failed; empty if it did not.
std::string try_save_catalog_copy(Repository& repo, size_t keep = kKeptCopies);

struct HistoryImport {
  std::optional<CatalogCopyInfo> copy;  // the copy merged; nullopt: none read back
  size_t records = 0;                   // history records added
};
// Merges the history of the newest copy that reads back (from any host); a
// damaged newer copy is skipped with a warning (Repository::warn).
HistoryImport import_newest_history(Repository& repo);

// Merges the history of `copy` into the repository's catalog; returns the
// records added. Throws Error(kIntegrity) if the copy does not authenticate.
size_t import_catalog_history(Repository& repo, const CatalogCopyInfo& copy);

}  // namespace keel::engine
