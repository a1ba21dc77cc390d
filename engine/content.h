// The content layer: the one place where blobs meet packs.
//
//   reading  blob locations -> ranged pack reads (planned, coalesced, fetched
//            in parallel within a memory budget) -> each blob's XXH3 checked
//            -> opened (decrypted, decompressed) and its plaintext checked
//            against its keyed id, or handed on still sealed; a copy that
//            fails (damaged, or false: written under a real id with other
//            content by a put-only or stolen key) is read around from the
//            blob's other copies, with a warning naming its pack. Blobs of
//            a pack whose blob key is authentic (the data key, or a key a
//            full key vouched for: pack_keys.h) are not hashed again: only
//            a full key can have sealed them. scrub() hashes every blob.
//   writing  sealed blobs -> packs streamed to the target -> each pack's
//            index entries committed to the catalog once the target has it
//
// Backup, restore, prune, check, the gateway's chunk store and the
// repository's own reads all go through here; the pack format itself is
// engine/pack.h. Errors name the blob, the pack, the offset and the target.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
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
  // Memory of exactly `length` bytes to open blob `index` into, where its
  // deliver() will find it, or empty (the default) to have it opened into
  // the reader's own buffers. Asked on the reader thread just before the
  // blob is opened, only where deliver() follows at once (plaintext of a
  // pack whose blob key needs no id check); the blob is then delivered,
  // from there or from other memory (a copy read elsewhere), or failed.
  // Spares a sink that copies each blob into a buffer of its own that copy.
  virtual std::span<uint8_t> place(size_t /*index*/, size_t /*length*/) { return {}; }
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

  // One blob, located through the index, checked, opened and verified
  // (another copy where the first fails). Throws Error(kNotFound) if it is
  // not indexed, Error(kIntegrity) if no copy is intact.
  Bytes read(const Id& blob);

  // Reads `ranges` (plan_reads over `blobs`, in any order the caller chose)
  // on parallel readers and hands every blob they cover to `sink`. Throws
  // only if cancelled or if the sink throws; damage goes to sink.fail().
  ReadStats read(std::span<const catalog::BlobLocation> blobs, std::span<const PackRange> ranges,
                 const ReadOptions& options, BlobSink& sink);

  // Why the copy at `copy` is not the blob its id names (damaged, gone, or
  // false); nullopt when it is. Reads that copy alone.
  std::optional<std::string> check_copy(const catalog::BlobLocation& copy);

  // Reads a whole pack front to back: each blob's checksum, plaintext and
  // keyed id (a full key's work), the whole pack's XXH3-128 where the index
  // knows it, and its header. Throws Error(kNotFound) if the pack is gone.
  PackScrub scrub(const catalog::PackRecord& pack);

  targets::Target& target() { return target_; }

  // Called when a read finds a pack gone from the target (another host's
  // prune deleted it): brings the index up to date so that the read can be
  // tried again from the blobs' other locations. May be called from reader
  // threads at once.
  using PackMissing = std::function<void(const Id& pack, std::span<const Id> blobs)>;
  void on_pack_missing(PackMissing fn) { on_pack_missing_ = std::move(fn); }
  // Called (from reader threads, one call at a time) once per pack whose
  // copy of a blob failed and was read around from another pack.
  using Warn = std::function<void(const std::string&)>;
  void on_bad_copy(Warn fn) { on_bad_copy_ = std::move(fn); }

 private:
  friend class ContentWriter;
  // Blobs opened in a row are checked against their keyed ids together:
  // hashing several at once costs less per byte (keyed_ids).
  static constexpr size_t kVerifyLanes = 4;
  // The buffers one opened blob lives in until it is verified and handed on.
  struct Opened {
    Bytes raw, scratch;
  };
  // Reused buffers of one reader.
  struct Buffers {
    Bytes sealed, resealed;
    std::array<Opened, kVerifyLanes> lanes;
  };
  // Opened blobs waiting to be verified, in the order they were opened:
  // copy, the caller's index, plaintext (in the lane of the same position).
  struct Batch {
    size_t size = 0;
    std::array<const catalog::BlobLocation*, kVerifyLanes> copies{};
    std::array<size_t, kVerifyLanes> indexes{};
    std::array<ByteView, kVerifyLanes> plains{};
  };
  // A blob whose stored bytes are at `range_offset`'s offset within a
  // fetched range, opened into `lane` (or `placed`, as open_blob) with the
  // pack's blob key; checked against the index's checksum only where it does
  // not open. Throws Error(kIntegrity) naming the copy (a checksum mismatch
  // at its offset where its bytes are damaged).
  ByteView open(const catalog::BlobLocation& copy, ByteView range, uint64_t range_offset, Opened& lane,
                const Key256& key, StageCpu* cpu, std::span<uint8_t> placed = {});
  // Which of the batch's plaintexts do not hash to their ids (a false copy:
  // any writer seals under a blob key of its own, so a copy written under a
  // real id with other content by a put-only or stolen key authenticates;
  // only its id tells it apart).
  std::array<bool, kVerifyLanes> false_copies(const Batch& batch, StageCpu* cpu);
  // The batch verified (unless its pack's blob key is authentic, pack_keys.h)
  // and each blob handed to `sink` in order (a false copy read from
  // another); leaves it empty.
  void deliver_batch(Batch& batch, BlobForm form, BlobSink& sink, Buffers& buf, StageCpu* cpu, bool verify);
  // What `form` hands on of a verified blob opened into `lane`: the plaintext,
  // or (format 2) the blob sealed again under this process's key.
  ByteView handed_on(const catalog::BlobLocation& copy, ByteView plain, Opened& lane, BlobForm form, Buffers& buf);
  // The blobs of `range` (fetched into `data`, its length) handed to `sink`;
  // returns the bytes fetched.
  uint64_t read_range(std::span<const catalog::BlobLocation> blobs, const PackRange& range, std::span<uint8_t> data,
                      BlobForm form, BlobSink& sink, Buffers& buf, StageCpu* cpu);
  // One copy, fetched and taken. Throws.
  ByteView read_copy(const catalog::BlobLocation& copy, BlobForm form, Buffers& buf, StageCpu* cpu);
  // Blob `index` from another copy than `failed`, which `why` (kIntegrity)
  // ruled out: delivered with a warning naming the bad pack, or failed
  // with every copy's fault.
  void deliver_elsewhere(const catalog::BlobLocation& failed, const Error& why, BlobForm form, BlobSink& sink,
                         size_t index, StageCpu* cpu);
  // The blob's current location after its pack was found missing, if the
  // index now has it elsewhere.
  std::optional<catalog::BlobLocation> relocate(const Id& missing_pack, std::span<const Id> blobs, const Id& blob);
  // The blobs of a range whose pack is gone, each from where the index has it now.
  void read_relocated(const PackRange& range, std::span<const catalog::BlobLocation> blobs, BlobForm form,
                      BlobSink& sink, const Error& missing, StageCpu* cpu);

  targets::Target& target_;
  PackKeys& keys_;
  catalog::PackIndex& index_;
  PackMissing on_pack_missing_;
  Warn on_bad_copy_;
  std::mutex warned_mu_;
  std::set<Id> warned_;  // packs already named in a warning
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
