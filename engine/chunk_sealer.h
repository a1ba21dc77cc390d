// How a repository stores one data chunk (and one tree): sealed (zstd at the given level
// when it shrinks the chunk, then AES-256-GCM under the repository's write key (the data key in format 1,
// this process's blob key in format 2: pack_keys.h) with
// the chunk's keyed id as associated data). Shared by backups and the
// gateway's dedupe buckets so that both write the same blobs.
#pragma once

#include <span>

#include "engine/repository.h"
#include "engine/stage_clock.h"
#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

// The chunk's id: HMAC-SHA-256 under the repository's id key.
Id chunk_id(const Repository& repo, ByteView chunk);
// ids[i] = chunk_id(repo, chunks[i]), several chunks hashed at once
// (util/hmac_sha256_lanes.h): cheaper per byte than one chunk at a time.
void chunk_ids(const Repository& repo, std::span<const ByteView> chunks, std::span<Id> ids);

// Replaces `sealed` with the stored form of `chunk`, compressed at
// `compression_level` (compress.h; usually the repository's). Reuses a
// compressor per thread, so callers on worker threads do not allocate. Compression and encryption are laps of `clock`, if given.
void seal_chunk(const Repository& repo, const Id& id, ByteView chunk, int compression_level, Bytes& sealed,
                StageClock* clock = nullptr);

// Replaces `sealed` with the stored form of an encoded tree (`id` is its
// chunk_id), compressed at kTreeCompressionLevel: trees are small and
// compress well whatever level the data uses.
inline constexpr int kTreeCompressionLevel = 3;
void seal_tree(const Repository& repo, const Id& id, ByteView body, Bytes& sealed);

}  // namespace keel::engine
