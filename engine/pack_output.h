// Writing new packs within a fixed amount of memory, and copying blobs into
// them still sealed: what prune's repack, repair's salvage and copy share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "catalog/pack_index.h"
#include "engine/content.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace keel::engine {

// A ContentWriter with its own upload threads and part budget: parts of
// `part_size` (or the target's minimum part size, if larger), at most
// `parts_in_flight` of them in memory at once.
class PackOutput {
 public:
  PackOutput(Content& content, uint64_t pack_size, uint64_t part_size, size_t parts_in_flight);

  ContentWriter& writer() { return writer_; }

 private:
  uint64_t part_size_;
  // Destroyed in reverse: the writer waits for its uploads before the pool goes.
  ThreadPool uploads_;
  ByteBudget budget_;
  ContentWriter writer_;
};

struct SealedCopy {
  uint64_t blobs = 0;
  uint64_t stored_bytes = 0;
};

// Reads `blobs` from `content` in ranges of at most `max_read` bytes that
// skip gaps over `gap`, and adds each to `writer` still sealed, as read and
// checked: a new copy without opening a byte. A blob that cannot be read or
// fails its checksum is not copied; `on_fail` gets its error (on a reader
// thread, one call at a time).
SealedCopy copy_sealed(Content& content, std::span<const catalog::BlobLocation> blobs, uint64_t gap, uint64_t max_read,
                       const ReadOptions& options, ContentWriter& writer,
                       const std::function<void(const Error&)>& on_fail);

}  // namespace keel::engine
