#include "engine/pack.h"

#include <algorithm>
#include <cstdint>
#include <ctime>

#include "engine/pack_vouch.h"
#include "engine/sealed_object.h"
#include "util/codec.h"
#include "util/error.h"
#include "util/huge_pages.h"

namespace keel::engine {

void encode_blob_record(Encoder& e, const catalog::BlobRecord& b) {
  e.u8(static_cast<uint8_t>(b.type));
  e.id(b.id);
  e.varint(b.offset);
  e.varint(b.stored_length);
  e.varint(b.raw_length);
  e.u64(b.xxh3);
}

catalog::BlobRecord decode_blob_record(Decoder& d) {
  catalog::BlobRecord b;
  uint8_t type = d.u8();
  if (type > static_cast<uint8_t>(catalog::BlobType::kTree)) d.fail("unknown blob type");
  b.type = static_cast<catalog::BlobType>(type);
  b.id = d.id();
  b.offset = d.varint();
  uint64_t stored = d.varint(), raw = d.varint();
  if (stored > UINT32_MAX || raw > UINT32_MAX) d.fail("blob " + b.id.short_hex() + " has a length out of range");
  b.stored_length = static_cast<uint32_t>(stored);
  b.raw_length = static_cast<uint32_t>(raw);
  b.xxh3 = d.u64();
  return b;
}

namespace {

// A part's bytes start at the first boundary of this size inside its buffer,
// and every part but a pack's last holds exactly part_size bytes (a blob
// may span two parts), so parts lie at multiples of part_size in the pack: a
// local target writes them with O_DIRECT (targets/local/direct_file.h),
// which takes such a part as it is instead of copying every byte through an
// aligned bounce buffer (3% of a first backup's CPU).
constexpr size_t kPartAlignment = 4096;

size_t part_start(const Bytes& buffer) {
  return (kPartAlignment - reinterpret_cast<uintptr_t>(buffer.data()) % kPartAlignment) % kPartAlignment;
}

// Appends `bytes` to the part being filled, calling `send_full` (which
// replaces `part` with an empty one) whenever it is full and more follows.
template <class SendFull>
void fill_parts(Bytes& part, uint64_t part_size, ByteView bytes, SendFull send_full) {
  while (!bytes.empty()) {
    if (part.size() - part_start(part) == part_size) send_full();
    const size_t n = std::min<uint64_t>(bytes.size(), part_size - (part.size() - part_start(part)));
    part.insert(part.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    bytes = bytes.subspan(n);
  }
}

// 1: blobs under the data key; 2: a key preamble first (pack_keys.h).
constexpr uint32_t kMaxPackVersion = 2;
constexpr std::string_view kPackMagic = "KEELPACK";

// A header larger than this is refused before it is read: it would list
// millions of blobs, far beyond any pack keel writes.
constexpr uint32_t kMaxHeaderSize = 64u << 20;

// The blob table, then (format 2, written by a full key) a section tag 1
// and the pack's vouch (pack_vouch.h).
constexpr uint8_t kVouchSection = 1;

Bytes encode_header(const std::vector<catalog::BlobRecord>& blobs, const std::optional<Id>& vouch = std::nullopt) {
  Encoder e;
  e.varint(blobs.size());
  for (const catalog::BlobRecord& b : blobs) encode_blob_record(e, b);
  if (vouch) {
    e.u8(kVouchSection);
    e.id(*vouch);
  }
  return e.take();
}

struct DecodedHeader {
  std::vector<catalog::BlobRecord> blobs;
  std::optional<Id> vouch;
};

DecodedHeader decode_header(ByteView body, uint64_t blob_region_end, const std::string& what) {
  Decoder d(body, what + " header");
  uint64_t n = d.varint();
  if (n > d.remaining() / 40) d.fail("blob count exceeds the header");
  DecodedHeader out;
  out.blobs.resize(n);
  for (catalog::BlobRecord& b : out.blobs) {
    b = decode_blob_record(d);
    if (b.offset + b.stored_length > blob_region_end || b.offset > blob_region_end) {
      d.fail("blob " + b.id.short_hex() + " lies outside the pack");
    }
  }
  if (d.remaining() > 0) {
    if (d.u8() != kVouchSection) d.fail("unknown header section");
    out.vouch = d.id();
  }
  d.expect_done();
  return out;
}

void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

std::string pack_key(const Id& pack) {
  std::string hex = pack.hex();
  return "packs/" + hex.substr(0, 2) + "/" + hex;
}

namespace {

// A pack's sealed header and where it starts, from its trailer.
struct PackTail {
  uint32_t version = 0;
  uint64_t header_start = 0;
  Bytes box;
};

PackTail read_pack_tail(targets::Target& target, const Id& pack, uint64_t pack_size, const std::string& what) {
  if (pack_size < kPackTrailerSize) throw Error(ErrorKind::kIntegrity, what + ": too short to be a pack");
  // Most headers fit in the last 64 KiB: read them with the trailer at once.
  uint64_t tail = std::min<uint64_t>(pack_size, 64 * 1024);
  Bytes buf(tail);
  if (target.get_range(pack_key(pack), pack_size - tail, buf) != tail) {
    throw Error(ErrorKind::kIntegrity, what + ": shorter than its listed size");
  }
  const uint8_t* trailer = buf.data() + tail - kPackTrailerSize;
  if (std::string_view(reinterpret_cast<const char*>(trailer + 8), 8) != kPackMagic) {
    throw Error(ErrorKind::kIntegrity, what + ": no pack trailer (not a keel pack, or truncated)");
  }
  PackTail out;
  uint32_t header_len = get_u32(trailer);
  out.version = get_u32(trailer + 4);
  if (out.version == 0 || out.version > kMaxPackVersion) {
    throw Error(ErrorKind::kIntegrity, what + ": unsupported pack version " + std::to_string(out.version));
  }
  if (header_len > kMaxHeaderSize || header_len + kPackTrailerSize > pack_size) {
    throw Error(ErrorKind::kIntegrity, what + ": header length " + std::to_string(header_len) + " out of range");
  }
  out.header_start = pack_size - kPackTrailerSize - header_len;
  if (header_len + kPackTrailerSize <= tail) {
    size_t at = tail - kPackTrailerSize - header_len;
    out.box.assign(buf.begin() + static_cast<ptrdiff_t>(at), buf.begin() + static_cast<ptrdiff_t>(at + header_len));
  } else {
    out.box.resize(header_len);
    if (target.get_range(pack_key(pack), out.header_start, out.box) != header_len) {
      throw Error(ErrorKind::kIntegrity, what + ": header truncated");
    }
  }
  return out;
}

constexpr std::string_view kPackIndexMagic = "KEELPIX1";

std::vector<catalog::BlobRecord> read_pack_index(targets::Target& target, const Key256& index_key, const Id& pack,
                                                 uint64_t blob_region_end, const std::string& what) {
  std::optional<Bytes> body = read_object(target, pack_index_key(pack), kPackIndexMagic, "pack index", index_key,
                                          pack.view(), what + " pack index");
  if (!body) {
    throw Error(ErrorKind::kIntegrity, what + ": a version-1 pack (written before the repository was migrated to "
                                              "format 2) without a pack index, which a put-only key needs to index "
                                              "it: run keel migrate --format 2 again with a full key");
  }
  return decode_header(*body, blob_region_end, what).blobs;
}

}  // namespace

std::string pack_index_key(const Id& pack) { return std::string(kPackIndexPrefix) + pack.hex(); }

void put_pack_index(targets::Target& target, const Key256& index_key, const Id& pack,
                    const std::vector<catalog::BlobRecord>& blobs) {
  target.put(pack_index_key(pack), seal_object(kPackIndexMagic, index_key, encode_header(blobs), pack.view()));
}

bool pack_index_intact(targets::Target& target, const Key256& index_key, const Id& pack, uint64_t pack_size) {
  if (pack_size < kPackTrailerSize) return false;
  try {
    read_pack_index(target, index_key, pack, pack_size - kPackTrailerSize, "pack " + pack.short_hex());
    return true;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kIntegrity) throw;
    return false;
  }
}

PackHeader read_pack_header(targets::Target& target, const MasterKeys& keys, const Id& pack, uint64_t pack_size) {
  std::string what = "pack " + pack.short_hex() + " on " + target.describe();
  PackTail tail = read_pack_tail(target, pack, pack_size, what);
  if (tail.version >= 2) {
    DecodedHeader h = decode_header(open_sealed(keys.index, tail.box, pack.view(), what + " header"), tail.header_start, what);
    const bool vouched = pack_vouched(keys, pack, h.blobs, h.vouch);
    return {std::move(h.blobs), vouched};
  }
  // Version 1: under the data key (the index key of format 1), which only
  // full keys hold, so a full key wrote it.
  if (!keys.full()) return {read_pack_index(target, keys.index, pack, tail.header_start, what), false};
  return {decode_header(open_sealed(keys.data, tail.box, pack.view(), what + " header"), tail.header_start, what).blobs,
          true};
}

std::optional<std::vector<catalog::BlobRecord>> read_version1_pack_header(targets::Target& target,
                                                                         const Key256& data_key, const Id& pack,
                                                                         uint64_t pack_size) {
  std::string what = "pack " + pack.short_hex() + " on " + target.describe();
  PackTail tail = read_pack_tail(target, pack, pack_size, what);
  if (tail.version != 1) return std::nullopt;
  return decode_header(open_sealed(data_key, tail.box, pack.view(), what + " header"), tail.header_start, what).blobs;
}

struct PackWriter::OpenPack {
  Id id = Id::random();
  std::unique_ptr<targets::Upload> upload;
  std::vector<catalog::BlobRecord> blobs;
  uint64_t size = 0;         // bytes appended so far
  uint64_t part_offset = 0;  // where the part being filled starts
  uint32_t next_part = 1;
  Xxh3Stream hash;
  TaskGroup parts;
};

PackWriter::PackWriter(targets::Target& target, const PackKeys& keys, catalog::BlobType type,
                       PackWriterOptions options, ThreadPool& uploads, ByteBudget& budget, OnCommit on_commit)
    : target_(target),
      keys_(keys),
      type_(type),
      options_(options),
      uploads_(uploads),
      budget_(budget),
      on_commit_(std::move(on_commit)) {
  options_.part_size = std::max({options_.part_size, target.min_part_size(), uint64_t{kPartAlignment}});
}

PackWriter::~PackWriter() {
  try {
    // Parts of a pack that never finished (a failed run) still use this writer.
    if (pack_) pack_->parts.wait();
  } catch (...) {
  }
  try {
    inflight_.wait();
  } catch (...) {
    // The failure was reported by flush(), or the backup is unwinding.
  }
}

Bytes PackWriter::take_buffer() {
  {
    std::lock_guard lock(free_mu_);
    if (!free_buffers_.empty()) {
      Bytes b = std::move(free_buffers_.back());
      free_buffers_.pop_back();
      b.resize(part_start(b));
      return b;
    }
  }
  // Room for a whole part after its start: the buffer never moves.
  Bytes b;
  reserve_huge(b, options_.part_size + kPartAlignment);
  b.resize(part_start(b));
  return b;
}

// Every buffer is kept: no more are made than the budget lets be in flight,
// plus the one being filled. Keeping two freed the rest whenever more parts
// were in flight, and their replacements cost fresh zeroed huge pages (1% of
// a first backup's CPU in the kernel's page clearing).
void PackWriter::recycle(Bytes&& buffer) {
  std::lock_guard lock(free_mu_);
  free_buffers_.push_back(std::move(buffer));
}

void PackWriter::start_pack() {
  // Open only once its upload is: after a failed start, the next add tries
  // again instead of writing parts to no upload.
  auto pack = std::make_shared<OpenPack>();
  pack->upload = target_.start_upload(pack_key(pack->id));
  pack_ = std::move(pack);
  part_ = take_buffer();
  Bytes preamble = keys_.preamble(pack_->id);
  pack_->hash.update(preamble);
  pack_->size += preamble.size();
  fill_parts(part_, options_.part_size, preamble, [this] { send_part(false); });
}

void PackWriter::add(const Id& id, uint32_t raw_length, ByteView sealed) {
  uint64_t checksum = xxh3_64(sealed);
  std::lock_guard lock(mu_);
  if (!pack_) start_pack();
  pack_->blobs.push_back({id, type_, pack_->size, static_cast<uint32_t>(sealed.size()), raw_length, checksum});
  pack_->hash.update(sealed);
  pack_->size += sealed.size();
  fill_parts(part_, options_.part_size, sealed, [this] { send_part(false); });
  bytes_written_ += sealed.size();
  if (pack_->size >= options_.pack_size) finish_pack();
}

void PackWriter::send_part(bool last) {
  auto data = std::make_shared<Bytes>(std::move(part_));
  part_ = last ? Bytes() : take_buffer();
  std::shared_ptr<OpenPack> pack = pack_;
  uint32_t number = pack->next_part++;
  uint64_t offset = pack->part_offset;
  const size_t start = part_start(*data), size = data->size() - start;
  pack->part_offset += size;
  budget_.acquire(size);
  pack->parts.started();
  uploads_.submit(pack->parts.wrap([this, pack, data, start, size, number, offset] {
    struct Release {
      ByteBudget& budget;
      size_t n;
      ~Release() { budget.release(n); }
    } release{budget_, size};
    StageTimer timer(options_.cpu, Stage::kWrite);
    pack->upload->write_part(number, offset, ByteView(*data).subspan(start, size));
    recycle(std::move(*data));
  }));
}

void PackWriter::finish_pack() {
  const std::optional<Id> vouch = pack_vouch(keys_.keys(), pack_->id, pack_->blobs);
  Bytes box = seal(keys_.header_key(), encode_header(pack_->blobs, vouch), pack_->id.view());
  Bytes tail = box;
  put_u32(tail, static_cast<uint32_t>(box.size()));
  put_u32(tail, keys_.pack_version());
  tail.insert(tail.end(), kPackMagic.begin(), kPackMagic.end());
  pack_->hash.update(tail);
  pack_->size += tail.size();
  fill_parts(part_, options_.part_size, tail, [this] { send_part(false); });
  send_part(true);

  std::shared_ptr<OpenPack> pack = std::move(pack_);
  // Queued after every part of this pack, so by the time a thread picks it
  // up all parts were picked up before it: waiting on them cannot deadlock.
  inflight_.started();
  uploads_.submit(inflight_.wrap([this, pack] {
    pack->parts.wait();
    StageTimer timer(options_.cpu, Stage::kWrite);
    pack->upload->commit();
    Hash128 digest = pack->hash.digest();
    catalog::PackRecord record{pack->id, pack->size, Bytes(digest.begin(), digest.end()),
                               static_cast<int64_t>(std::time(nullptr)), std::nullopt};
    record.vouched = keys_.keys().format < 2 || keys_.keys().full();
    // Object Lock: what its upload locked it until, so a backup need not ask.
    if (std::optional<targets::Retention> lock = pack->upload->retention()) record.retain_until_unix = lock->until_unix;
    on_commit_(record, pack->blobs);
    ++packs_committed_;
  }));
}

void PackWriter::flush() {
  {
    std::lock_guard lock(mu_);
    if (pack_) finish_pack();
  }
  inflight_.wait();
}

uint64_t PackWriter::bytes_written() { return bytes_written_; }

uint64_t PackWriter::packs_committed() { return packs_committed_; }

}  // namespace keel::engine
