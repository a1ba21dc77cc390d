// Sealing a plaintext given in two parts, into a kept buffer: the box is the
// one seal() (crypto.h) makes of head || body, so it opens with
// open_sealed(). Blobs are sealed this way (blob_codec.cc): a raw chunk is
// its one-byte tag and the chunk as it was read, which seal() needed
// copied behind the tag first, and growing the output from empty filled
// every sealed byte with zeros before the cipher wrote it (the copy and
// the fill were about 2% of a first backup's CPU).
#pragma once

#include "engine/crypto.h"
#include "util/bytes.h"

namespace keel::engine {

// Replaces `out` with the sealed box of head || body. Reuses out's memory:
// only bytes beyond its previous size are zero-filled before being written.
void seal_parts(const Key256& key, ByteView head, ByteView body, ByteView associated, Bytes& out);

}  // namespace keel::engine
