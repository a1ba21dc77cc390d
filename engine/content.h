// The content layer: the one place where blobs meet packs.
//
//   reading  blob locations -> ranged pack reads (planned, coalesced, fetched
//            in parallel within a memory budget) -> each blob's XXH3 checked
//            -> opened (decrypted, decompressed), or handed on still sealed
//   writing  sealed blobs -> packs streamed to the target -> each pack's
//            index entries committed to the catalog once the target has it
//
// Backup, restore, prune, check, the gateway's chunk store and the
// repository's own reads all go through here; the pack format itself is
// engine/pack.h. Errors name the blob, the pack, the offset and the target.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "catalog/pack_index.h"
#include "engine/change_log.h"
#include "engine/crypto.h"
#include "engine/pack.h"
#include "engine/pack_keys.h"
#include "engine/stage_cpu.h"
#include "targets/target.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/id.h"
#include "util/thread_pool.h"

namespace keel::engine {

// One ranged read of a pack, covering some of the caller's blobs.
struct PackRange {
  Id pack;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<size_t> blobs;  // indexes into the caller's list: by offset as planned; read hands them over in this order
};

// Sorts `blobs` by pack and offset and joins neighbours at most `gap` bytes
// apart into reads of at most `max_read` bytes (a larger blob is read alone).
std::vector<PackRange> plan_reads(std::span<const catalog::BlobLocation> blobs, uint64_t gap, uint64_t max_read);

// What a read hands over for each blob.
enum class BlobForm {
  kOpened,  // the plaintext
  kSealed,  // the stored bytes, checksum checked (to copy into another pack)
};

struct ReadOptions {
  BlobForm form = BlobForm::kOpened;
  size_t readers = 0;  // reads in flight; 0: adaptive, up to the target's read_concurrency()
  uint64_t memory_budget = 256ull << 20;      // bytes of read buffers, at most
  const std::atomic<bool>* cancel = nullptr;  // once set, the read stops with Error(kInterrupted)
  // Where fetching ranges and checking blobs count as Stage::kRead, opening
  // them as kDecrypt and kDecompress, if anywhere.
  StageCpu* cpu = nullptr;
};

// Receives the blobs of a read on reader threads: concurrently, in no
// particular order, each blob once, either delivered or failed.
class BlobSink {
 public:
  virtual ~BlobSink() = default;
  // `data` is valid only during the call.
  virtual void deliver(size_t index, ByteView data) = 0;
  // The blob could not be read or is damaged; `error` names its pack and offset.
  virtual void fail(size_t index, const Error& error) = 0;
};

struct ReadStats {
  size_t peak_readers = 0;  // most reads the adaptive limit allowed at once
  uint64_t bytes_read = 0;
};

// What a scrub of one pack found.
struct PackScrub {
  uint64_t bytes_read = 0;
  std::vector<Id> bad_blobs;          // blobs whose bytes fail their checksum
  std::vector<std::string> problems;  // each naming the pack, the target and where
};

class Content {
 public:
  // `keys` seal and open blobs and pack headers; `index` locates blobs and
  // receives committed packs. All three must outlive this object.
  Content(targets::Target& target, PackKeys& keys, catalog::PackIndex& index);

  // One blob, located through the index, checked and opened. Throws
  // Error(kNotFound) if it is not indexed, Error(kIntegrity) if damaged.
  Bytes read(const Id& blob);

  // Reads `ranges` (plan_reads over `blobs`, in any order the caller chose)
  // on parallel readers and hands every blob they cover to `sink`. Throws
  // only if cancelled or if the sink throws; damage goes to sink.fail().
  ReadStats read(std::span<const catalog::BlobLocation> blobs, std::span<const PackRange> ranges,
                 const ReadOptions& options, BlobSink& sink);

  // Reads a whole pack front to back: each blob's checksum (no keys needed),
  // the whole pack's XXH3-128 where the index knows it, and its header.
  PackScrub scrub(const catalog::PackRecord& pack);

  targets::Target& target() { return target_; }

  // Called when a read finds a pack gone from the target (another host's
  // prune deleted it): brings the index up to date so that the read can be
  // tried again from the blobs' other locations. May be called from reader
  // threads at once.
  using PackMissing = std::function<void(const Id& pack, std::span<const Id> blobs)>;
  void on_pack_missing(PackMissing fn) { on_pack_missing_ = std::move(fn); }

 private:
  friend class ContentWriter;
  // The blob's current location after its pack was found missing, if the
  // index now has it elsewhere.
  std::optional<catalog::BlobLocation> relocate(const Id& missing_pack, std::span<const Id> blobs, const Id& blob);
  // The blobs of a range whose pack is gone, each from where the index has it now.
  void read_relocated(const PackRange& range, std::span<const catalog::BlobLocation> blobs, BlobForm form,
                      BlobSink& sink, const Error& missing);

  // The stored bytes of a blob handed on sealed: as they are, or (format 2)
  // sealed again under this process's key, since the pack they go to names
  // only that one.
  ByteView handed_on(const Id& pack, const catalog::BlobRecord& blob, ByteView sealed, Bytes& scratch, Bytes& out);

  targets::Target& target_;
  PackKeys& keys_;
  catalog::PackIndex& index_;
  PackMissing on_pack_missing_;
};

// Stores sealed blobs in packs (data and tree blobs in packs of their own)
// and commits each pack's index entries once the target has committed the
// pack. Thread-safe; memory as PackWriter's.
class ContentWriter {
 public:
  ContentWriter(Content& content, PackWriterOptions options, ThreadPool& uploads, ByteBudget& budget);

  void add(catalog::BlobType type, const Id& id, uint32_t raw_length, ByteView sealed);
  // Finishes the open packs and waits until every pack is committed and
  // indexed; rethrows the first failure.
  void flush();

  uint64_t packs_committed() const { return packs_committed_; }
  uint64_t pack_bytes_committed() const { return pack_bytes_committed_; }
  // The packs committed since the last call, with their blobs: what the
  // change log entry of the command that wrote them names.
  std::vector<LoggedPack> take_committed();

 private:
  void commit(const catalog::PackRecord& pack, const std::vector<catalog::BlobRecord>& blobs);

  catalog::PackIndex& index_;
  std::atomic<uint64_t> packs_committed_{0};
  std::atomic<uint64_t> pack_bytes_committed_{0};
  std::mutex committed_mutex_;
  std::vector<LoggedPack> committed_;
  PackWriter data_;
  PackWriter trees_;
};

}  // namespace keel::engine
