// keel repair --undelete (docs/immutable.md, "After an attack"): on a
// versioned or Object Lock bucket, credentials that may delete can still
// hide a repository's objects without destroying them: a plain DELETE adds
// a delete marker, a PUT a newer (garbage) version on top. This finds, for
// each of keel's objects, the newest version that passes keel's own
// verification and removes the delete markers and the failing versions
// above it, so that version is current again. Works on the target alone:
// the repository need not open (its config and key slots may be hidden too);
// the password opens the newest intact version of a key slot.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "targets/versioned_store.h"

namespace keel::engine {

struct UndeleteOptions {
  std::string password;
  bool dry_run = true;  // only report what would be removed
  // Only markers and versions written at or after this time are removed; a
  // key with one from before stays as it is (listed in `skipped`). Keeps
  // what keel's own forget and prune deleted earlier deleted.
  std::optional<int64_t> since_unix;
  // Send x-amz-bypass-governance-retention: removes versions under a
  // GOVERNANCE lock (a bucket's default retention locks an attacker's PUTs too).
  bool bypass_governance = false;
  const std::atomic<bool>* cancel = nullptr;
};

struct UndeleteStep {
  std::string key;  // relative to the repository
  std::string version_id;
  bool delete_marker = false;
  int64_t modified_unix = 0;
  std::string reason;  // "delete marker", or why the version fails verification
  std::string error;   // the store's refusal; empty once removed (or in a dry run)
};

struct UndeleteResult {
  std::vector<UndeleteStep> steps;   // removed (dry run: to be removed), newest first per key
  std::vector<std::string> restored;  // keys whose last good version is (dry run: would be) current again
  // "<key>: <why>" of keys hidden by an attack that this cannot bring back:
  // no version passes verification, or one to remove predates --since.
  std::vector<std::string> skipped;
  uint64_t versions_checked = 0;  // versions read and verified
  bool refused() const;  // a step the store refused
};

// Throws Error(kWrongPassword) if no intact key slot version opens with the
// password, Error(kUsage) if the key that opens is put-only.
UndeleteResult undelete(targets::VersionedStore& store, const UndeleteOptions& options);

}  // namespace keel::engine
