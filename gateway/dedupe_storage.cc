#include "gateway/dedupe_storage.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>

#include "engine/chunker.h"
#include "engine/prune.h"
#include "gateway/piece_producer.h"
#include "util/codec.h"
#include "util/error.h"

namespace keel::gateway {

namespace {

constexpr std::string_view kChunkListPrefix = "k1:";
// Chunks a reader keeps in flight: a few MiB, enough to hide the target's latency.
constexpr size_t kReadAhead = 8;

class ChunkWriter final : public BucketStorage::Writer {
 public:
  explicit ChunkWriter(engine::ChunkStore& store)
      : session_(store.session()),
        chunker_(store.repository().config().chunker, store.repository().keys().chunker) {}

  void write(ByteView data) override {
    buffer_.insert(buffer_.end(), data.begin(), data.end());
    size_ += data.size();
    cut(false);
  }

  uint64_t size() const override { return size_; }

  std::string commit() override {
    cut(true);
    session_.sync();
    return encode_chunk_list(chunks_);
  }

 private:
  // Cuts chunks while a whole max-size chunk's worth is buffered (the
  // chunker needs that much to find the same cut points as on a file), or
  // everything at the end of the stream. The buffer is compacted once a
  // max-size chunk's worth was consumed, so each byte moves about once.
  void cut(bool final) {
    const size_t max = chunker_.params().max_size;
    while (buffer_.size() - consumed_ >= max || (final && consumed_ < buffer_.size())) {
      const ByteView rest(buffer_.data() + consumed_, buffer_.size() - consumed_);
      const size_t n = chunker_.next_cut(rest, final);
      chunks_.push_back({session_.add(rest.first(n)), static_cast<uint32_t>(n)});
      consumed_ += n;
    }
    if (consumed_ >= max || consumed_ == buffer_.size()) {
      buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_));
      consumed_ = 0;
    }
  }

  engine::ChunkStore::Session session_;
  engine::Chunker chunker_;
  Bytes buffer_;  // [consumed_, size) is not yet cut
  size_t consumed_ = 0;
  uint64_t size_ = 0;
  std::vector<ChunkPiece> chunks_;
};

// Serves a range of a chunk list, fetching up to kReadAhead chunks ahead.
class ChunkReader final : public PieceProducer {
 public:
  ChunkReader(engine::ChunkStore& store, std::vector<ChunkPiece> chunks, uint64_t skip, uint64_t length)
      : PieceProducer(skip, length), store_(store), chunks_(std::move(chunks)) {
    fill();
  }

 private:
  void fill() {
    while (pending_.size() < kReadAhead && next_ < chunks_.size()) {
      pending_.push_back({store_.read(chunks_[next_].id), chunks_[next_].length});
      ++next_;
    }
  }

  void next_piece(Bytes& chunk) override {
    if (pending_.empty()) throw Error(ErrorKind::kIntegrity, "gateway: an object's chunks end before its length");
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    fill();
    chunk = p.bytes.get();
    if (chunk.size() != p.length) {
      throw Error(ErrorKind::kIntegrity, "gateway: a chunk read back with " + std::to_string(chunk.size()) +
                                             " bytes instead of " + std::to_string(p.length));
    }
  }

  struct Pending {
    std::future<Bytes> bytes;
    uint32_t length;
  };
  engine::ChunkStore& store_;
  std::vector<ChunkPiece> chunks_;
  size_t next_ = 0;
  std::deque<Pending> pending_;
};

}  // namespace

DedupeStorage::DedupeStorage(std::shared_ptr<engine::ChunkStore> chunks, std::string capacity_path)
    : chunks_(std::move(chunks)), capacity_path_(std::move(capacity_path)) {}

std::unique_ptr<BucketStorage::Writer> DedupeStorage::create() { return std::make_unique<ChunkWriter>(*chunks_); }

std::unique_ptr<BodyProducer> DedupeStorage::read(const std::vector<Segment>& segments, uint64_t first,
                                                  uint64_t length) {
  // The chunks the range touches, and how far into the first one it starts.
  std::vector<ChunkPiece> needed;
  uint64_t position = 0, skip = 0;
  const uint64_t end = first + length;
  for (const auto& segment : segments) {
    if (position + segment.length <= first) {
      position += segment.length;
      continue;
    }
    for (const ChunkPiece& chunk : decode_chunk_list(segment.file)) {
      if (position >= end) break;
      if (position + chunk.length > first) {
        if (needed.empty()) skip = first - position;
        needed.push_back(chunk);
      }
      position += chunk.length;
    }
    if (position >= end) break;
  }
  return std::make_unique<ChunkReader>(*chunks_, std::move(needed), skip, length);
}

std::unique_ptr<engine::Repository> open_bucket_repository(const engine::RepositoryAccess& access,
                                                           const std::string& user) {
  const auto password = engine::stored_password(access);
  if (!password) {
    throw Error(ErrorKind::kUsage, user + ": no repository password (password_env '" +
                                       access.password_env + "' is unset and there is no password_file)");
  }
  auto repo = engine::open_repository(access, *password);
  repo->sync_catalog();
  engine::declare_external_roots(*repo, "keel gateway dedupe buckets");
  return repo;
}

std::string encode_chunk_list(const std::vector<ChunkPiece>& chunks) {
  Encoder e;
  e.varint(chunks.size());
  for (const ChunkPiece& chunk : chunks) {
    e.id(chunk.id);
    e.varint(chunk.length);
  }
  return std::string(kChunkListPrefix) + to_hex(e.data());
}

std::vector<ChunkPiece> decode_chunk_list(const std::string& segment) {
  if (!segment.starts_with(kChunkListPrefix)) {
    throw Error(ErrorKind::kIntegrity, "gateway: segment '" + segment.substr(0, 16) + "' is not a chunk list");
  }
  const Bytes data = from_hex(std::string_view(segment).substr(kChunkListPrefix.size()));
  Decoder d(data, "gateway chunk list");
  const uint64_t count = d.varint();
  if (count > d.remaining() / 33) d.fail("chunk count " + std::to_string(count) + " exceeds the bytes left");
  std::vector<ChunkPiece> chunks(count);
  for (ChunkPiece& chunk : chunks) {
    chunk.id = d.id();
    const uint64_t length = d.varint();
    if (length == 0 || length > UINT32_MAX) d.fail("chunk length " + std::to_string(length));
    chunk.length = static_cast<uint32_t>(length);
  }
  d.expect_done();
  return chunks;
}

}  // namespace keel::gateway
