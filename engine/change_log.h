// The change log: how one host's catalog learns cheaply what other hosts did
// to the repository. Every command that adds or removes packs, snapshots or
// condemnations appends one small sealed object log/<20-digit ns time>-<16
// hex random> naming what it changed, after the objects themselves are on the
// target. A catalog remembers the entries it has applied; a sync lists only
// log/ and reads the entries it has not seen, and falls back to a full
// listing (Repository::sync_catalog) where it cannot be sure: a catalog that
// never followed the log, an entry gone before it was read, a compaction that
// removed entries it had not applied. Entries are written once and never
// overwritten (append-only targets). Prune compacts old entries, recording the
// keys it removed in a new entry. docs/repository-format.md has the layout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/pack_index.h"
#include "engine/crypto.h"
#include "targets/target.h"
#include "util/id.h"

namespace keel::engine {

inline constexpr std::string_view kLogPrefix = "log/";

struct LoggedPack {
  catalog::PackRecord pack;                // id, size, created (no checksum, no condemnation)
  std::vector<catalog::BlobRecord> blobs;  // its header's records
  std::optional<Id> vouch;                 // engine/pack_vouch.h; set by Repository::log_changes
};

// A blob of a removed pack that lives on in another.
struct LoggedRelocation {
  catalog::BlobLocation location;
  std::optional<Id> vouch;  // of this one record in its pack; set by Repository::log_changes
};

struct ChangeLogEntry {
  std::vector<LoggedPack> packs_added;
  std::vector<Id> packs_removed;
  // Blobs of removed packs that live on in another pack: a catalog that
  // indexed them in the removed pack finds them here.
  std::vector<LoggedRelocation> relocated;
  std::vector<Id> snapshots_added;
  std::vector<Id> snapshots_removed;
  // Condemnation records (condemned/) were written or removed: read them again.
  bool condemnations_changed = false;
  // Log entries a prune removed (compaction).
  std::vector<std::string> entries_compacted;

  bool empty() const {
    return packs_added.empty() && packs_removed.empty() && relocated.empty() && snapshots_added.empty() &&
           snapshots_removed.empty() && !condemnations_changed && entries_compacted.empty();
  }
};

// A new, unique key that sorts after those written earlier by this clock.
std::string new_log_key(int64_t unix_ns);
// The time a log key was written at; nullopt for a foreign name.
std::optional<int64_t> log_key_time(std::string_view key);

// Seals and stores `entry` under a new key; returns the key.
std::string put_log_entry(targets::Target& target, const Key256& key, const ChangeLogEntry& entry);
// The keys under log/, sorted (foreign names are skipped).
std::vector<std::string> list_log_keys(targets::Target& target);
// The entry at `log_key`; nullopt if it is gone (compacted). Throws
// Error(kIntegrity) if it does not open.
std::optional<ChangeLogEntry> read_log_entry(targets::Target& target, const Key256& key, const std::string& log_key);

}  // namespace keel::engine
