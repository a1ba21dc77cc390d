// The local SQLite catalog of one repository: the index of what is on the
// target (packs and blobs; snapshots and trees) plus operational history
// (drills, job runs). WAL mode, numbered migrations. Everything but history
// can be rebuilt from the target.
//
// The catalog knows nothing of the engine's formats: trees are opaque bodies,
// ids are keel::Id. One Catalog object may be shared by threads; calls are
// serialized internally. Code that needs one concern may take the narrower
// interface (PackIndex, SnapshotIndex, DrillHistory, JobHistory).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "catalog/corrupt_database.h"
#include "catalog/drill_history.h"
#include "catalog/job_history.h"
#include "catalog/pack_index.h"
#include "catalog/snapshot_index.h"

namespace keel::catalog {

class Catalog : public PackIndex, public SnapshotIndex, public DrillHistory, public JobHistory {
 public:
  // Opens or creates the database at `path` (and its directory) and applies
  // pending migrations. Throws Error(kTargetIo) if it cannot.
  static std::unique_ptr<Catalog> open(const std::string& path);
  // A new, empty catalog that lives in memory until it is destroyed (tests).
  static std::unique_ptr<Catalog> open_in_memory();
  // Renames a damaged catalog file (and its WAL) to <path>.corrupt-<unix
  // time>, out of the way of a new one; returns the new name. The file
  // must not be open.
  static std::string move_aside(const std::string& path);
  ~Catalog() override = default;

  virtual int schema_version() = 0;

  // Reads every page (PRAGMA quick_check: time grows with the file).
  // Throws CorruptDatabase if SQLite finds damage.
  virtual void verify() = 0;

  // Small key/value facts: repository id, target description.
  virtual std::optional<std::string> get_meta(std::string_view key) = 0;
  virtual void set_meta(std::string_view key, std::string_view value) = 0;

  // Drops packs, blobs, trees and snapshots (not history: drills, job runs),
  // before a rebuild.
  virtual void clear_index() = 0;

  // Bounds this connection's page cache (default 64 MiB). Scans that touch
  // every page once, as prune's, gain nothing from a large one, and it would
  // make their memory grow with the repository.
  virtual void limit_cache(uint64_t bytes) = 0;

  // A consistent copy of the whole database in a new file at `path` (which
  // must not exist), taken while other calls go on.
  virtual void export_to(const std::string& path) = 0;
  // Adds the history (drills, ...) recorded in the catalog file at `path`
  // that this one lacks; returns the records added. The file may be of an
  // older schema, not a newer one.
  virtual size_t import_history(const std::string& path) = 0;

  // Runs `fn` inside one transaction (committed if it returns, rolled back
  // if it throws). Calls on this catalog from `fn` join the transaction; a
  // nested transaction (or add_pack) that throws undoes only its own part.
  // Other threads' calls wait until it ends, so `fn` must not wait on them.
  virtual void transaction(const std::function<void()>& fn) = 0;
};

}  // namespace keel::catalog
