// The catalog's index of what is on the target: packs and the blobs they
// hold. The records are also the pack format's header entries (engine/pack.h),
// which is why they live here, below the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "util/bytes.h"
#include "util/id.h"

namespace keel::catalog {

enum class BlobType : uint8_t { kData = 0, kTree = 1 };

struct PackRecord {
  Id id;
  uint64_t size = 0;        // bytes of the whole pack object
  Bytes xxh3_128;           // 16 bytes: XXH3-128 of the whole pack object
  int64_t created_unix = 0; // seconds
  // When a prune condemned the pack (it will be deleted once its grace
  // period has passed); empty while it is in use. See docs/maintenance.md.
  std::optional<int64_t> condemned_unix;
  // Object Lock repositories: until when the pack is known to be locked
  // (learned from its upload and from HEAD); empty: not known.
  std::optional<int64_t> retain_until_unix = {};
  // Format 2: a full key checked that a full key wrote the pack (its vouch,
  // engine/pack_vouch.h), so a full key's backups may dedupe against it.
  // Format 1, where only full keys exist: always.
  bool vouched = false;
  // False where a put-only key indexed the pack: it cannot check a vouch,
  // so a full key that opens the catalog next judges the pack from its
  // header (Repository::judge_packs).
  bool judged = true;
};

// A blob's place in its pack. `xxh3` covers the stored (sealed) bytes, so a
// scrub can find bit rot without keys.
struct BlobRecord {
  Id id;
  BlobType type = BlobType::kData;
  uint64_t offset = 0;
  uint32_t stored_length = 0;
  uint32_t raw_length = 0;
  uint64_t xxh3 = 0;
};

struct BlobLocation {
  Id pack;
  BlobRecord blob;
};

class PackIndex {
 public:
  virtual ~PackIndex() = default;

  // A pack and all its blobs, in one transaction. A blob may be stored in
  // several packs (two hosts stored it at once, or a repack copied it out of
  // a condemned pack): the index keeps every location until its pack is
  // removed. Adding a pack again (a rebuild) refreshes its entries.
  virtual void add_pack(const PackRecord& pack, std::span<const BlobRecord> blobs) = 0;
  virtual bool has_pack(const Id& pack) = 0;
  virtual std::optional<PackRecord> find_pack(const Id& pack) = 0;
  virtual std::vector<PackRecord> list_packs() = 0;
  // Condemns a pack (since the given time) or, with nullopt, returns it to use.
  virtual void set_condemned(const Id& pack, std::optional<int64_t> since_unix) = 0;
  // Records that the pack is locked until then (never moves it earlier).
  virtual void set_retain_until(const Id& pack, int64_t until_unix) = 0;
  // Packs in use (not condemned) not known to be locked until `until_unix`.
  virtual uint64_t packs_locked_less_than(int64_t until_unix) = 0;
  // The location to read a blob from: a copy in a pack in use before one in
  // a condemned pack, then the pack indexed first.
  virtual std::optional<BlobLocation> find_blob(const Id& blob) = 0;
  // Every copy of a blob, in the order find_blob prefers them: where a
  // read finds its copy damaged or false, the others to try.
  virtual std::vector<BlobLocation> find_blob_copies(const Id& blob) = 0;
  // find_blob for many, in one read transaction: a consistent view, and no
  // file-lock round trip per blob (restore planning looks up every chunk).
  virtual std::vector<std::optional<BlobLocation>> find_blobs(std::span<const Id> blobs) = 0;
  // Every blob indexed in the pack (copies held elsewhere too included).
  virtual std::vector<BlobRecord> blobs_in_pack(const Id& pack) = 0;
  // Every blob a backup may dedupe against (those in condemned packs are
  // left out, and with `vouched_only` those in packs not vouched for; a
  // blob in several packs may come more than once): loads the engine's
  // dedupe index. Other threads' calls wait until it returns; `fn` itself
  // may call this catalog.
  virtual void for_each_usable_blob(const std::function<void(const Id&, BlobType)>& fn, bool vouched_only) = 0;
  // Every location of every indexed blob, in id order, then in the order
  // the packs were indexed (prune's scan). Other
  // threads' calls wait until it returns; `fn` itself may call this catalog.
  virtual void for_each_blob_location(const std::function<void(const BlobLocation&)>& fn) = 0;
  virtual uint64_t blob_count() = 0;  // locations: a blob in two packs counts twice
  // Blobs indexed in more than one pack: a normal state (check reports it).
  virtual uint64_t blobs_stored_more_than_once() = 0;
  // Removes the pack, the blob locations in it and the cached bodies of the
  // trees no other pack holds.
  virtual void remove_pack(const Id& pack) = 0;

  // Packs this catalog's writers committed that no change-log entry names
  // yet (engine/change_log.h): marked once indexed, unmarked once logged. A
  // writer killed in between leaves its packs marked, and the next backup
  // on this host logs them, so other hosts' catalogs learn of the packs it
  // reuses from the log. unlogged_packs() lists those still indexed.
  virtual void mark_unlogged(const Id& pack) = 0;
  virtual std::vector<PackRecord> unlogged_packs() = 0;
  virtual void mark_logged(std::span<const Id> packs) = 0;
};

}  // namespace keel::catalog
