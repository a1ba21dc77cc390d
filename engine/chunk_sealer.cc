#include "engine/chunk_sealer.h"

#include <memory>

#include "engine/blob_codec.h"
#include "engine/compress.h"
#include "engine/crypto.h"

namespace keel::engine {

Id chunk_id(const Repository& repo, ByteView chunk) { return keyed_id(repo.keys().id, chunk); }

void chunk_ids(const Repository& repo, std::span<const ByteView> chunks, std::span<Id> ids) {
  keyed_ids(repo.keys().id, chunks, ids);
}

void seal_chunk(const Repository& repo, const Id& id, ByteView chunk, int level, Bytes& sealed, StageClock* clock) {
  thread_local std::unique_ptr<Compressor> compressor;
  thread_local int compressor_level = kCompressionOff;
  if (level != kCompressionOff && compressor_level != level) {
    compressor = std::make_unique<Compressor>(level);
    compressor_level = level;
  }
  seal_blob(repo.write_key(), level != kCompressionOff ? compressor.get() : nullptr, id, chunk, sealed, clock);
}

void seal_tree(const Repository& repo, const Id& id, ByteView body, Bytes& sealed) {
  thread_local Compressor compressor(kTreeCompressionLevel);
  seal_blob(repo.write_key(), &compressor, id, body, sealed);
}

}  // namespace keel::engine
