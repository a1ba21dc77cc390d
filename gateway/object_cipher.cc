#include "gateway/object_cipher.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "gateway/piece_producer.h"
#include "util/error.h"

namespace keel::gateway {

namespace {

constexpr uint64_t kSealedBlock = kCipherBlock + engine::kSealOverhead;

std::array<uint8_t, 8> block_aad(uint64_t index) {
  std::array<uint8_t, 8> aad{};
  for (size_t i = 0; i < aad.size(); ++i) aad[i] = static_cast<uint8_t>(index >> (8 * (aad.size() - 1 - i)));
  return aad;
}

class SealingWriter final : public BucketStorage::Writer {
 public:
  SealingWriter(std::unique_ptr<BucketStorage::Writer> inner, const engine::Key256& key)
      : inner_(std::move(inner)), key_(key) {
    block_.reserve(kCipherBlock);
  }

  void write(ByteView data) override {
    size_ += data.size();
    while (!data.empty()) {
      const size_t take = std::min(kCipherBlock - block_.size(), data.size());
      block_.insert(block_.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(take));
      data = data.subspan(take);
      if (block_.size() == kCipherBlock) seal_block();
    }
  }
  uint64_t size() const override { return size_; }
  std::string commit() override {
    if (!block_.empty()) seal_block();
    return inner_->commit();
  }

 private:
  void seal_block() {
    sealed_.clear();
    engine::seal(key_, block_, block_aad(index_++), sealed_);
    inner_->write(sealed_);
    block_.clear();
  }

  std::unique_ptr<BucketStorage::Writer> inner_;
  engine::Key256 key_;
  Bytes block_;
  Bytes sealed_;
  uint64_t index_ = 0;
  uint64_t size_ = 0;
};

// The blocks of one segment that a read opens, [first_block, end_block).
struct SegmentBlocks {
  uint64_t plain_length = 0;
  uint64_t first_block = 0;
  uint64_t end_block = 0;
};

class OpeningProducer final : public PieceProducer {
 public:
  OpeningProducer(std::unique_ptr<BodyProducer> sealed, std::vector<SegmentBlocks> segments, uint64_t skip,
                  uint64_t length, const engine::Key256& key)
      : PieceProducer(skip, length), sealed_(std::move(sealed)), segments_(std::move(segments)), key_(key) {
    if (!segments_.empty()) block_ = segments_.front().first_block;
  }

 private:
  void next_piece(Bytes& plain) override {
    while (block_ == segments_[segment_].end_block) {
      if (++segment_ == segments_.size()) throw Error(ErrorKind::kIntegrity, "gateway: encrypted object read past its blocks");
      block_ = segments_[segment_].first_block;
    }
    const SegmentBlocks& s = segments_[segment_];
    const uint64_t plain_size = std::min<uint64_t>(kCipherBlock, s.plain_length - block_ * kCipherBlock);
    sealed_block_.resize(static_cast<size_t>(plain_size + engine::kSealOverhead));
    for (size_t got = 0; got < sealed_block_.size();) {
      const size_t n = sealed_->read(std::span(sealed_block_).subspan(got));
      if (n == 0) throw Error(ErrorKind::kIntegrity, "gateway: an encrypted object's stored bytes end early");
      got += n;
    }
    engine::open_sealed(key_, sealed_block_, block_aad(block_), plain, "gateway encrypted object block");
    ++block_;
  }

  std::unique_ptr<BodyProducer> sealed_;
  std::vector<SegmentBlocks> segments_;
  engine::Key256 key_;
  size_t segment_ = 0;
  uint64_t block_ = 0;  // the next block of segments_[segment_]
  Bytes sealed_block_;
};

}  // namespace

uint64_t sealed_length(uint64_t plain) {
  return plain + (plain + kCipherBlock - 1) / kCipherBlock * engine::kSealOverhead;
}

std::unique_ptr<BucketStorage::Writer> create_object_writer(BucketStorage& storage,
                                                            const std::optional<engine::Key256>& key) {
  if (!key) return storage.create();
  return std::make_unique<SealingWriter>(storage.create(), *key);
}

std::unique_ptr<BodyProducer> read_object(BucketStorage& storage, const std::vector<Segment>& segments,
                                          uint64_t first, uint64_t length, const std::optional<engine::Key256>& key) {
  if (!key) return storage.read(segments, first, length);
  // The blocks the range touches are one stretch of the stored segments:
  // the first segment from its first touched block, the last one up to the
  // end of its last touched block, all of those between.
  std::vector<Segment> stored;
  std::vector<SegmentBlocks> touched;
  uint64_t plain_at = 0, stored_at = 0, stored_first = 0, stored_length = 0, skip = 0;
  const uint64_t end = first + length;
  for (const Segment& segment : segments) {
    stored.push_back({segment.file, sealed_length(segment.length)});
    const uint64_t lo = std::max(first, plain_at), hi = std::min(end, plain_at + segment.length);
    if (lo < hi) {
      const SegmentBlocks blocks{segment.length, (lo - plain_at) / kCipherBlock,
                                 (hi - plain_at + kCipherBlock - 1) / kCipherBlock};
      const uint64_t from = blocks.first_block * kSealedBlock;
      const uint64_t to = std::min(stored.back().length, blocks.end_block * kSealedBlock);
      if (touched.empty()) {
        stored_first = stored_at + from;
        skip = lo - plain_at - blocks.first_block * kCipherBlock;
      }
      stored_length += to - from;
      touched.push_back(blocks);
    }
    plain_at += segment.length;
    stored_at += stored.back().length;
  }
  if (end > plain_at) throw Error(ErrorKind::kIntegrity, "gateway: a read past the end of an encrypted object");
  return std::make_unique<OpeningProducer>(storage.read(stored, stored_first, stored_length), std::move(touched),
                                           skip, length, *key);
}

}  // namespace keel::gateway
