// How one chunk or tree is stored: a one-byte compression tag and the
// payload (raw or a zstd frame), sealed with AES-256-GCM under the data key
// with the blob id as associated data, so a blob cannot pose as another.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/compress.h"
#include "engine/crypto.h"
#include "engine/stage_clock.h"
#include "util/bytes.h"
#include "util/id.h"

namespace keel::engine {

// Replaces `sealed` with the stored form of `raw`. `compressor` may be null
// (store raw). Compression and encryption are laps of `clock`, if given.
void seal_blob(const Key256& key, Compressor* compressor, const Id& id, ByteView raw, Bytes& sealed,
               StageClock* clock = nullptr);

// The content of a stored blob: where it was compressed, in `placed` if that
// holds raw_length bytes, else in `raw`; where it was not, in `scratch` (not
// copied out). Valid until the buffer it is in changes. `raw` and `scratch`
// are reused buffers that only grow (the blob's opened stored form is the
// first sealed.size() - kSealOverhead bytes of `scratch`). Throws
// Error(kIntegrity) naming `what` if it does not authenticate or decode to
// raw_length bytes (`placed` may then hold anything). Decryption and
// decompression count in `cpu`, if given.
ByteView open_blob(const Key256& key, const Id& id, ByteView sealed, uint32_t raw_length, Bytes& raw, Bytes& scratch,
                   const std::string& what, StageCpu* cpu = nullptr, std::span<uint8_t> placed = {});

}  // namespace keel::engine
