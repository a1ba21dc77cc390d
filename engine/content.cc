#include "engine/content.h"

#include <algorithm>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "engine/adaptive_limit.h"
#include "engine/blob_codec.h"
#include "util/buffer_pool.h"
#include "util/checksum.h"
#include "util/spares.h"

namespace keel::engine {
namespace {

// A batch of opened blobs is verified once it holds this much plaintext
// (or kVerifyLanes blobs): small chunks are hashed together, large ones
// alone, while they are still in the core's cache from decompression.
constexpr size_t kVerifyBatchBytes = 512 << 10;

// Whole-pack scrubs read blob-aligned ranges of about this size.
constexpr uint64_t kScrubRead = 16ull << 20;

std::string pack_where(targets::Target& target, const Id& pack) {
  return "pack " + pack.hex() + " on " + target.describe();
}

// Fetches [offset, offset + buf.size()) of a pack; throws if it is shorter.
void fetch(targets::Target& target, const Id& pack, uint64_t offset, std::span<uint8_t> buf) {
  if (target.get_range(pack_key(pack), offset, buf) != buf.size()) {
    throw Error(ErrorKind::kIntegrity, pack_where(target, pack) + ": shorter than the index says (" +
                                           std::to_string(buf.size()) + " bytes at offset " + std::to_string(offset) +
                                           ")");
  }
}

// The blob's stored bytes within a fetched range, checked against the index.
ByteView checked(targets::Target& target, const Id& pack, const catalog::BlobRecord& blob, ByteView range,
                 uint64_t range_offset) {
  ByteView sealed = range.subspan(blob.offset - range_offset, blob.stored_length);
  if (xxh3_64(sealed) != blob.xxh3) {
    throw Error(ErrorKind::kIntegrity, pack_where(target, pack) + ": checksum mismatch in blob " +
                                           blob.id.short_hex() + " at offset " + std::to_string(blob.offset));
  }
  return sealed;
}

std::string blob_where(targets::Target& target, const Id& pack, const catalog::BlobRecord& blob) {
  return "blob " + blob.id.short_hex() + " in " + pack_where(target, pack) + " at offset " + std::to_string(blob.offset);
}

Error false_copy(targets::Target& target, const catalog::BlobLocation& copy) {
  return Error(ErrorKind::kIntegrity, blob_where(target, copy.pack, copy.blob) +
                                          ": its content does not hash to its id (a false copy: written under this id "
                                          "with other content, by a put-only or stolen key)");
}

}  // namespace

std::vector<PackRange> plan_reads(std::span<const catalog::BlobLocation> blobs, uint64_t gap, uint64_t max_read) {
  std::vector<size_t> order(blobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(blobs[a].pack, blobs[a].blob.offset) < std::tie(blobs[b].pack, blobs[b].blob.offset);
  });
  std::vector<PackRange> ranges;
  for (size_t i : order) {
    const catalog::BlobRecord& b = blobs[i].blob;
    if (!ranges.empty()) {
      PackRange& last = ranges.back();
      uint64_t end = last.offset + last.length;
      if (last.pack == blobs[i].pack && b.offset >= end && b.offset - end <= gap &&
          b.offset + b.stored_length - last.offset <= max_read) {
        last.length = b.offset + b.stored_length - last.offset;
        last.blobs.push_back(i);
        continue;
      }
    }
    ranges.push_back({blobs[i].pack, b.offset, b.stored_length, {i}});
  }
  return ranges;
}

Content::Content(targets::Target& target, PackKeys& keys, catalog::PackIndex& index)
    : target_(target), keys_(keys), index_(index) {}

ByteView Content::open(const catalog::BlobLocation& copy, ByteView range, uint64_t range_offset, Opened& lane,
                       const Key256& key, StageCpu* cpu, std::span<uint8_t> placed) {
  // The stored bytes' checksum is taken only where they fail to open: the
  // seal authenticates them, and the checksum then tells damage, named
  // with its offset, from a wrong key (1.5% of a restore's CPU).
  const ByteView stored = range.subspan(copy.blob.offset - range_offset, copy.blob.stored_length);
  try {
    return open_blob(key, copy.blob.id, stored, copy.blob.raw_length, lane.raw, lane.scratch,
                     blob_where(target_, copy.pack, copy.blob), cpu, placed);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kIntegrity) checked(target_, copy.pack, copy.blob, range, range_offset);
    throw;
  }
}

std::array<bool, Content::kVerifyLanes> Content::false_copies(const Batch& batch, StageCpu* cpu) {
  std::array<Id, kVerifyLanes> ids;
  {
    StageTimer timer(cpu, Stage::kVerify);
    keyed_ids(keys_.keys().id, std::span(batch.plains.data(), batch.size), std::span(ids.data(), batch.size));
  }
  std::array<bool, kVerifyLanes> out{};
  for (size_t k = 0; k < batch.size; ++k) out[k] = ids[k] != batch.copies[k]->blob.id;
  return out;
}

ByteView Content::handed_on(const catalog::BlobLocation& copy, ByteView plain, Opened& lane, BlobForm form,
                            Buffers& buf) {
  if (form == BlobForm::kOpened) return plain;
  // Sealed again under this process's key: the pack it goes to names only
  // that one. `scratch` still holds the opened stored form, at its front.
  buf.resealed.clear();
  const ByteView opened = ByteView(lane.scratch).first(copy.blob.stored_length - kSealOverhead);
  seal(keys_.write_key(), opened, copy.blob.id.view(), buf.resealed);
  return buf.resealed;
}

void Content::deliver_batch(Batch& batch, BlobForm form, BlobSink& sink, Buffers& buf, StageCpu* cpu, bool verify) {
  if (batch.size == 0) return;
  const std::array<bool, kVerifyLanes> bad = verify ? false_copies(batch, cpu) : std::array<bool, kVerifyLanes>{};
  const size_t n = std::exchange(batch.size, 0);
  for (size_t k = 0; k < n; ++k) {
    const catalog::BlobLocation& copy = *batch.copies[k];
    if (bad[k]) {
      deliver_elsewhere(copy, false_copy(target_, copy), form, sink, batch.indexes[k], cpu);
    } else {
      sink.deliver(batch.indexes[k], handed_on(copy, batch.plains[k], buf.lanes[k], form, buf));
    }
  }
}

ByteView Content::read_copy(const catalog::BlobLocation& copy, BlobForm form, Buffers& buf, StageCpu* cpu) {
  buf.sealed.resize(copy.blob.stored_length);
  {
    StageTimer timer(cpu, Stage::kRead);
    fetch(target_, copy.pack, copy.blob.offset, buf.sealed);
  }
  // Format 1 hands copies on as stored: a false one needs the data key,
  // which only full keys hold.
  if (form == BlobForm::kSealed && !keys_.reseal_copies()) {
    StageTimer timer(cpu, Stage::kRead);
    return checked(target_, copy.pack, copy.blob, buf.sealed, copy.blob.offset);
  }
  const BlobKey key = keys_.blob_key(copy.pack);
  Batch one;
  one.copies[0] = &copy;
  one.plains[0] = open(copy, buf.sealed, copy.blob.offset, buf.lanes[0], key.key, cpu);
  one.size = 1;
  if (!key.authentic && false_copies(one, cpu)[0]) throw false_copy(target_, copy);
  return handed_on(copy, one.plains[0], buf.lanes[0], form, buf);
}

void Content::deliver_elsewhere(const catalog::BlobLocation& failed, const Error& why, BlobForm form, BlobSink& sink,
                                size_t index, StageCpu* cpu) {
  std::string faults = why.what();
  bool other = false;
  Buffers buf;
  for (const catalog::BlobLocation& copy : index_.find_blob_copies(failed.blob.id)) {
    if (copy.pack == failed.pack) continue;
    other = true;
    ByteView out;
    try {
      out = read_copy(copy, form, buf, cpu);
    } catch (const Error& e) {
      faults += std::string("; ") + e.what();
      continue;
    }
    if (on_bad_copy_) {
      std::lock_guard lock(warned_mu_);
      if (warned_.insert(failed.pack).second) {
        on_bad_copy_(std::string(why.what()) + ": read from its copy in pack " + copy.pack.hex() +
                     " instead (other blobs of pack " + failed.pack.short_hex() +
                     " read around are not listed); run keel check --read-data, then keel repair");
      }
    }
    sink.deliver(index, out);
    return;
  }
  sink.fail(index, Error(why.kind(), faults + (other ? "" : " (no other copy is indexed)")));
}

Bytes Content::read(const Id& blob) {
  std::optional<catalog::BlobLocation> loc = index_.find_blob(blob);
  if (!loc) throw Error(ErrorKind::kNotFound, "blob " + blob.short_hex() + " is not in the index of " + target_.describe());
  class One : public BlobSink {
   public:
    void deliver(size_t, ByteView data) override { out.assign(data.begin(), data.end()); }
    void fail(size_t, const Error& e) override { error = e; }
    Bytes out;
    std::optional<Error> error;
  } sink;
  const PackRange range{loc->pack, loc->blob.offset, loc->blob.stored_length, {0}};
  Bytes data(range.length);
  Buffers buf;
  read_range(std::span(&*loc, 1), range, data, BlobForm::kOpened, sink, buf, nullptr);
  if (sink.error) throw *sink.error;
  return std::move(sink.out);
}

uint64_t Content::read_range(std::span<const catalog::BlobLocation> blobs, const PackRange& range,
                             std::span<uint8_t> data, BlobForm form, BlobSink& sink, Buffers& buf, StageCpu* cpu) {
  try {
    StageTimer timer(cpu, Stage::kRead);
    fetch(target_, range.pack, range.offset, data);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kNotFound) {
      read_relocated(range, blobs, form, sink, e, cpu);
    } else {
      for (size_t i : range.blobs) {
        if (e.kind() == ErrorKind::kIntegrity) {
          deliver_elsewhere(blobs[i], e, form, sink, i, cpu);
        } else {
          sink.fail(i, e);
        }
      }
    }
    return 0;
  }
  // Format 1 hands copies on as stored: a false one needs the data key,
  // which only full keys hold.
  const bool opens = form == BlobForm::kOpened || keys_.reseal_copies();
  std::optional<BlobKey> key;  // the pack's blob key, looked up once per range
  bool verify = true;          // unless that key is authentic
  Batch batch;
  size_t batch_bytes = 0;
  for (size_t i : range.blobs) {
    ByteView stored;
    try {
      if (opens) {
        if (!key) {
          key = keys_.blob_key(range.pack);
          verify = !key->authentic;
        }
        // Unverified plaintext goes on at once: where the sink wants it.
        const std::span<uint8_t> placed =
            !verify && form == BlobForm::kOpened ? sink.place(i, blobs[i].blob.raw_length) : std::span<uint8_t>{};
        const ByteView plain = open(blobs[i], data, range.offset, buf.lanes[batch.size], key->key, cpu, placed);
        batch.copies[batch.size] = &blobs[i];
        batch.indexes[batch.size] = i;
        batch.plains[batch.size++] = plain;
        batch_bytes = batch.size == 1 ? plain.size() : batch_bytes + plain.size();
      } else {
        StageTimer timer(cpu, Stage::kRead);
        stored = checked(target_, range.pack, blobs[i].blob, data, range.offset);
      }
    } catch (const Error& e) {
      deliver_batch(batch, form, sink, buf, cpu, verify);  // the blobs before it first, in order
      if (e.kind() == ErrorKind::kIntegrity) {
        deliver_elsewhere(blobs[i], e, form, sink, i, cpu);
      } else {
        sink.fail(i, e);
      }
      continue;
    }
    if (!opens) {
      sink.deliver(i, stored);
    } else if (!verify || batch.size == kVerifyLanes || batch_bytes >= kVerifyBatchBytes) {
      // Unverified blobs go on at once, from one lane: batched, they were
      // copied on from buffers that had left the cache, and the other
      // lanes' buffers were fresh memory to fault in.
      deliver_batch(batch, form, sink, buf, cpu, verify);
    }
  }
  deliver_batch(batch, form, sink, buf, cpu, verify);
  return data.size();
}

ReadStats Content::read(std::span<const catalog::BlobLocation> blobs, std::span<const PackRange> ranges,
                        const ReadOptions& options, BlobSink& sink) {
  ReadStats stats;
  if (ranges.empty()) return stats;
  // Fixed with options.readers; otherwise adaptive, up to the target's taste.
  size_t max_readers = options.readers ? options.readers : target_.read_concurrency();
  if (max_readers == 0) max_readers = std::max<size_t>(8, 4 * std::thread::hardware_concurrency());
  max_readers = std::min(max_readers, ranges.size());
  size_t initial = options.readers ? max_readers : std::min<size_t>(4, max_readers);
  AdaptiveLimit limit(initial, max_readers, [this] { return target_.throttle_events(); });
  // Reads in flight hold at most memory_budget bytes of buffers.
  uint64_t biggest = 1;
  for (const PackRange& r : ranges) biggest = std::max(biggest, r.length);
  BufferPool buffers(biggest, std::max<uint64_t>(1, options.memory_budget / biggest));
  std::atomic<uint64_t> bytes_read{0};
  auto cancelled = [&] { return options.cancel && options.cancel->load(); };
  // Opening buffers, one set per read in flight (the limit's), not per
  // reader thread: fresh memory costs page faults (util/spares.h).
  Spares<Buffers> spare_buffers;

  TaskGroup group;
  {
    ThreadPool readers(max_readers, max_readers);
    for (const PackRange& range : ranges) {
      if (cancelled() || group.failed()) break;
      group.started();
      readers.submit(group.wrap([&, r = &range] {
        limit.acquire();
        struct Release {
          AdaptiveLimit& limit;
          uint64_t bytes;
          ~Release() { limit.release(bytes); }
        } release{limit, r->length};
        if (cancelled()) return;
        Spare<Buffers> buf(spare_buffers);
        std::shared_ptr<uint8_t[]> data = buffers.get();  // waits while the budget is spent
        bytes_read += read_range(blobs, *r, std::span<uint8_t>(data.get(), r->length), options.form, sink, *buf,
                                 options.cpu);
      }));
    }
  }
  group.wait();
  if (cancelled()) throw Error(ErrorKind::kInterrupted, "read of " + target_.describe() + " interrupted");
  stats.peak_readers = limit.peak_limit();
  stats.bytes_read = bytes_read;
  return stats;
}

std::optional<std::string> Content::check_copy(const catalog::BlobLocation& copy) {
  Buffers buf;
  try {
    read_copy(copy, BlobForm::kOpened, buf, nullptr);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity && e.kind() != ErrorKind::kNotFound) throw;
    return e.what();
  }
  return std::nullopt;
}

std::optional<catalog::BlobLocation> Content::relocate(const Id& missing_pack, std::span<const Id> blobs,
                                                      const Id& blob) {
  if (!on_pack_missing_) return std::nullopt;
  on_pack_missing_(missing_pack, blobs);
  std::optional<catalog::BlobLocation> loc = index_.find_blob(blob);
  if (!loc || loc->pack == missing_pack) return std::nullopt;
  return loc;
}

void Content::read_relocated(const PackRange& range, std::span<const catalog::BlobLocation> blobs, BlobForm form,
                             BlobSink& sink, const Error& missing, StageCpu* cpu) {
  std::vector<Id> ids;
  for (size_t i : range.blobs) ids.push_back(blobs[i].blob.id);
  Buffers buf;
  for (size_t n = 0; n < ids.size(); ++n) {
    size_t i = range.blobs[n];
    // The hook runs once per range: the blobs after the first find the index already updated.
    std::optional<catalog::BlobLocation> loc =
        n == 0 ? relocate(range.pack, ids, ids[0]) : index_.find_blob(ids[n]);
    if (!loc || loc->pack == range.pack) {
      sink.fail(i, missing);
      continue;
    }
    ByteView out;
    try {
      out = read_copy(*loc, form, buf, cpu);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kIntegrity) {
        deliver_elsewhere(*loc, e, form, sink, i, cpu);
      } else {
        sink.fail(i, e);
      }
      continue;
    }
    sink.deliver(i, out);
  }
}

PackScrub Content::scrub(const catalog::PackRecord& pack) {
  PackScrub out;
  std::string where = pack_where(target_, pack.id);
  std::vector<catalog::BlobRecord> blobs = index_.blobs_in_pack(pack.id);
  std::sort(blobs.begin(), blobs.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  Xxh3Stream hash;
  Bytes buf;
  uint64_t pos = 0;
  size_t next_blob = 0;
  std::string key = pack_key(pack.id);
  // Opening every blob needs the pack's blob key (a full key's work); a
  // preamble that does not open is reported once, with the header below.
  std::optional<Key256> blob_key;
  if (keys_.keys().full()) {
    try {
      blob_key = keys_.blob_key(pack.id).key;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity) throw;
      out.problems.push_back(e.what());
    }
  }
  Buffers opened;
  std::vector<catalog::BlobLocation> copies;  // of the blobs of one read
  while (pos < pack.size) {
    // Extend the range over whole blobs up to kScrubRead (at least one).
    uint64_t end = pos;
    size_t first_blob = next_blob;
    while (next_blob < blobs.size() &&
           (end == pos || blobs[next_blob].offset + blobs[next_blob].stored_length - pos <= kScrubRead)) {
      end = blobs[next_blob].offset + blobs[next_blob].stored_length;
      ++next_blob;
    }
    if (next_blob == blobs.size() && end - pos < kScrubRead) end = std::min(pack.size, pos + kScrubRead);
    if (end <= pos) end = std::min(pack.size, pos + kScrubRead);
    buf.resize(end - pos);
    size_t n = target_.get_range(key, pos, buf);
    out.bytes_read += n;
    if (n != buf.size()) {
      out.problems.push_back(where + ": truncated at offset " + std::to_string(pos + n) + " (index says " +
                             std::to_string(pack.size) + " bytes)");
      return out;
    }
    hash.update(buf);
    copies.clear();
    for (size_t i = first_blob; i < next_blob; ++i) {
      if (blobs[i].offset >= pos && blobs[i].offset + blobs[i].stored_length <= end) copies.push_back({pack.id, blobs[i]});
    }
    Batch batch;
    auto verify_batch = [&] {
      const std::array<bool, kVerifyLanes> bad = false_copies(batch, nullptr);
      const size_t n = std::exchange(batch.size, 0);
      for (size_t k = 0; k < n; ++k) {
        if (!bad[k]) continue;
        out.problems.push_back(false_copy(target_, *batch.copies[k]).what());
        out.bad_blobs.push_back(batch.copies[k]->blob.id);
      }
    };
    for (const catalog::BlobLocation& copy : copies) {
      try {
        checked(target_, pack.id, copy.blob, buf, pos);  // the index's checksum too
        if (blob_key) {
          batch.plains[batch.size] = open(copy, buf, pos, opened.lanes[batch.size], *blob_key, nullptr);
          batch.copies[batch.size++] = &copy;
        }
      } catch (const Error& e) {
        out.problems.push_back(e.what());
        out.bad_blobs.push_back(copy.blob.id);
      }
      if (batch.size == kVerifyLanes) verify_batch();
    }
    verify_batch();
    pos = end;
  }
  if (pack.xxh3_128.size() == 16) {
    Hash128 digest = hash.digest();
    if (!std::equal(digest.begin(), digest.end(), pack.xxh3_128.begin()) && out.bad_blobs.empty()) {
      out.problems.push_back(where + ": pack checksum mismatch outside its blobs (header or trailer damaged)");
    }
  }
  try {
    // The pack's own header against the index's entries for this pack (not
    // for other copies of its blobs elsewhere).
    std::vector<catalog::BlobRecord> header = read_pack_header(target_, keys_.keys(), pack.id, pack.size).blobs;
    std::map<Id, uint64_t> in_header, in_index;
    for (const catalog::BlobRecord& b : header) in_header.emplace(b.id, b.offset);
    for (const catalog::BlobRecord& b : blobs) in_index.emplace(b.id, b.offset);
    if (in_header != in_index) {
      size_t unindexed = 0, absent = 0;
      for (const auto& [id, offset] : in_header) unindexed += in_index.count(id) ? 0 : 1;
      for (const auto& [id, offset] : in_index) absent += in_header.count(id) ? 0 : 1;
      out.problems.push_back(where + ": header and index disagree (" + std::to_string(unindexed) +
                             " blobs of the header not indexed in this pack, " + std::to_string(absent) +
                             " indexed here but not in the header, others at other offsets); run keel catalog rebuild");
    }
  } catch (const Error& e) {
    // Gone since its blobs were read (a prune elsewhere): the caller asks the target.
    if (e.kind() == ErrorKind::kNotFound) throw;
    out.problems.push_back(e.what());
  }
  return out;
}

ContentWriter::ContentWriter(Content& content, PackWriterOptions options, ThreadPool& uploads, ByteBudget& budget)
    : index_(content.index_),
      data_(content.target_, content.keys_, catalog::BlobType::kData, options, uploads, budget,
            [this](auto& pack, auto& blobs) { commit(pack, blobs); }),
      trees_(content.target_, content.keys_, catalog::BlobType::kTree, options, uploads, budget,
             [this](auto& pack, auto& blobs) { commit(pack, blobs); }) {}

void ContentWriter::add(catalog::BlobType type, const Id& id, uint32_t raw_length, ByteView sealed) {
  (type == catalog::BlobType::kTree ? trees_ : data_).add(id, raw_length, sealed);
}

void ContentWriter::flush() {
  data_.flush();
  trees_.flush();
}

void ContentWriter::commit(const catalog::PackRecord& pack, const std::vector<catalog::BlobRecord>& blobs) {
  index_.add_pack(pack, blobs);
  index_.mark_unlogged(pack.id);  // until the command's log entry names it
  {
    std::lock_guard lock(committed_mutex_);
    catalog::PackRecord record{pack.id, pack.size, {}, pack.created_unix, {}};
    record.vouched = pack.vouched;
    committed_.push_back(LoggedPack{std::move(record), blobs, std::nullopt});
  }
  ++packs_committed_;
  pack_bytes_committed_ += pack.size;
}

std::vector<LoggedPack> ContentWriter::take_committed() {
  std::lock_guard lock(committed_mutex_);
  return std::exchange(committed_, {});
}

}  // namespace keel::engine
