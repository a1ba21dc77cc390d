// Packs: many sealed blobs in one object, followed by a sealed header that
// lists them and a fixed trailer, so the target alone can rebuild the index:
//
//   [preamble] | blob 0 | blob 1 | ... | sealed header | header length (u32) | version (u32) | "KEELPACK"
//
// The header is sealed under the index key (the data key in format 1) with
// the pack id as associated data. Version 2 packs start with a preamble
// holding their blob key (pack_keys.h). Pack ids are random (a pack is named before its content is known,
// since it streams out in parts while still being filled).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "catalog/pack_index.h"
#include "engine/crypto.h"
#include "engine/pack_keys.h"
#include "engine/stage_cpu.h"
#include "targets/target.h"
#include "util/checksum.h"
#include "util/codec.h"
#include "util/thread_pool.h"

namespace keel::engine {

constexpr size_t kPackTrailerSize = 16;

std::string pack_key(const Id& pack);  // "packs/3f/3fa2..."

// One header record (type byte, id, offset, stored and raw length, XXH3-64),
// as pack headers and change-log entries store it.
void encode_blob_record(Encoder& e, const catalog::BlobRecord& b);
catalog::BlobRecord decode_blob_record(Decoder& d);

struct PackHeader {
  std::vector<catalog::BlobRecord> blobs;
  bool vouched = false;  // as catalog::PackRecord::vouched (engine/pack_vouch.h)
};

// Reads and opens the header of a pack of `pack_size` bytes: version-2
// packs under the index key; version-1 packs under the data key, or, for a
// put-only key in a repository migrated to format 2, from the pack's
// pack-index object (below). Throws Error(kIntegrity) if it does not open.
PackHeader read_pack_header(targets::Target& target, const MasterKeys& keys, const Id& pack, uint64_t pack_size);

// Version-1 packs of a repository migrated to format 2 (keel migrate) keep
// their headers under the data key, which put-only keys lack: their blob
// table is stored again under the index key, in pack-index/<pack id>:
// "KEELPIX1" + box(index key, AD pack id) of the header's plaintext.
inline constexpr std::string_view kPackIndexPrefix = "pack-index/";
std::string pack_index_key(const Id& pack);
void put_pack_index(targets::Target& target, const Key256& index_key, const Id& pack,
                    const std::vector<catalog::BlobRecord>& blobs);
// Whether pack-index/<pack> opens under `index_key` and fits a pack of
// `pack_size` bytes (false when it is missing or damaged).
bool pack_index_intact(targets::Target& target, const Key256& index_key, const Id& pack, uint64_t pack_size);
// The header of `pack` if it is a version-1 pack (under `data_key`);
// nullopt if it is a version-2 pack. Throws Error(kIntegrity) if it does not open.
std::optional<std::vector<catalog::BlobRecord>> read_version1_pack_header(targets::Target& target,
                                                                         const Key256& data_key, const Id& pack,
                                                                         uint64_t pack_size);

struct PackWriterOptions {
  uint64_t pack_size = 64ull << 20;  // finish a pack once it holds this much
  uint64_t part_size = 8ull << 20;   // stream it out in parts of this size
  StageCpu* cpu = nullptr;           // where uploads and commits count as Stage::kWrite, if anywhere
};

// Accepts sealed blobs from many threads, fills packs, streams their parts
// out on `uploads` while they fill, and reports each pack once it is
// committed to the target. Memory: at most one part per writer being
// filled, plus the parts in flight (bounded by `budget`).
class PackWriter {
 public:
  using OnCommit = std::function<void(const catalog::PackRecord&, const std::vector<catalog::BlobRecord>&)>;

  PackWriter(targets::Target& target, const PackKeys& keys, catalog::BlobType type, PackWriterOptions options,
             ThreadPool& uploads, ByteBudget& budget, OnCommit on_commit);
  ~PackWriter();  // aborts a pack that was not finished

  // Appends a copy of a sealed blob (callers reuse their buffers).
  void add(const Id& id, uint32_t raw_length, ByteView sealed);
  // Finishes the current pack and waits until every pack is committed.
  // Rethrows the first upload failure.
  void flush();

  uint64_t bytes_written();
  uint64_t packs_committed();

 private:
  struct OpenPack;
  void start_pack();
  void send_part(bool last);
  void finish_pack();
  // Part buffers are recycled: a fresh multi-MiB allocation costs page
  // faults on every byte, which showed up as a tenth of backup CPU.
  Bytes take_buffer();
  void recycle(Bytes&& buffer);

  targets::Target& target_;
  const PackKeys& keys_;
  catalog::BlobType type_;
  PackWriterOptions options_;
  ThreadPool& uploads_;
  ByteBudget& budget_;
  OnCommit on_commit_;

  std::mutex mu_;
  std::shared_ptr<OpenPack> pack_;  // the one being filled, if any
  Bytes part_;
  std::mutex free_mu_;
  std::vector<Bytes> free_buffers_;
  TaskGroup inflight_;
  // Atomics, not mu_: upload threads update them while a producer may hold
  // mu_ waiting for queue room.
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> packs_committed_{0};
};

}  // namespace keel::engine
