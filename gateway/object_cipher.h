// Server-side encryption of object bytes, one stream format for raw and
// dedupe buckets and every kind of key (SSE-C, SSE-S3 on raw buckets).
//
// A stored segment is its plaintext cut into blocks of kCipherBlock bytes
// (the last one shorter), each sealed on its own with engine::seal under the
// object's data key: a random 96-bit nonce, AES-256-GCM, a 16-byte tag, and
// the block's index in the segment as associated data. Blocks therefore
// cannot be altered, reordered, truncated or moved to another position
// without the read failing (Error kIntegrity), and a range is served by
// opening only the blocks it touches. Segment::length stays the plaintext
// length; the stored length follows from it (sealed_length). What the
// format does not detect: two whole segments of one multipart object (same
// data key) swapped on the storage.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/crypto.h"
#include "gateway/bucket_storage.h"

namespace keel::gateway {

inline constexpr size_t kCipherBlock = 64 * 1024;

// The stored size of a segment of `plain` bytes.
uint64_t sealed_length(uint64_t plain);

// A writer into `storage`: sealing blocks under `key` when there is one.
// size() counts plaintext bytes.
std::unique_ptr<BucketStorage::Writer> create_object_writer(BucketStorage& storage,
                                                            const std::optional<engine::Key256>& key);

// `length` plaintext bytes from `first` of the object whose bytes are
// `segments` (plaintext lengths), opened with `key` when there is one.
std::unique_ptr<BodyProducer> read_object(BucketStorage& storage, const std::vector<Segment>& segments,
                                          uint64_t first, uint64_t length, const std::optional<engine::Key256>& key);

}  // namespace keel::gateway
