// Opening sealed boxes and zstd frames into reused buffers, for the read
// path's blobs (open_blob in blob_codec.h): a buffer that holds contents of
// varying sizes only grows (overwritable in util/huge_pages.h), where
// resizing it to each content zero-filled the difference every time it
// grew back (memset, 3% of a restore's CPU on the mixed dataset).
// crypto.h's open_sealed and compress.h's decompress, which size their
// output exactly, are these followed by a resize.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "engine/crypto.h"
#include "util/bytes.h"

namespace keel::engine {

// Opens a sealed box into the front of `buffer` and returns the plaintext
// (box.size() - kSealOverhead bytes). Throws Error(kIntegrity) as
// open_sealed does, `buffer` left empty.
ByteView open_sealed_into(const Key256& key, ByteView box, ByteView associated, Bytes& buffer,
                          const std::string& what);

// Decompresses a zstd frame into the front of `buffer` and returns the
// raw_length bytes. Throws Error(kIntegrity) as decompress does, `buffer`
// left empty.
ByteView decompress_into(ByteView frame, size_t raw_length, Bytes& buffer, const std::string& what);

// Decompresses a zstd frame into `out`, which must be the size of its
// content, and returns it. Throws Error(kIntegrity) as decompress does.
ByteView decompress_to(ByteView frame, std::span<uint8_t> out, const std::string& what);

}  // namespace keel::engine
