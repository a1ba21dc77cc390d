#include "engine/blob_codec.h"

#include "engine/seal_parts.h"
#include "util/error.h"

namespace keel::engine {
namespace {
enum : uint8_t { kRaw = 0, kZstd = 1 };
}

void seal_blob(const Key256& key, Compressor* compressor, const Id& id, ByteView raw, Bytes& sealed, Bytes& scratch,
               StageClock* clock) {
  scratch.clear();
  scratch.push_back(kZstd);
  const bool compressed = compressor && compressor->compress(raw, scratch);
  if (clock) clock->lap(Stage::kCompress);
  // Stored raw: the tag, then the chunk where it lies (no copy behind the tag).
  static constexpr uint8_t kRawTag[] = {kRaw};
  if (compressed) {
    seal_parts(key, scratch, {}, id.view(), sealed);
  } else {
    seal_parts(key, kRawTag, raw, id.view(), sealed);
  }
  if (clock) clock->lap(Stage::kEncrypt);
}

ByteView open_blob(const Key256& key, const Id& id, ByteView sealed, uint32_t raw_length, Bytes& raw, Bytes& scratch,
                   const std::string& what, StageCpu* cpu) {
  {
    StageTimer timer(cpu, Stage::kDecrypt);
    open_sealed(key, sealed, id.view(), scratch, what);
  }
  if (scratch.empty()) throw Error(ErrorKind::kIntegrity, what + ": empty blob");
  ByteView payload = ByteView(scratch).subspan(1);
  switch (scratch[0]) {
    case kRaw:
      if (payload.size() != raw_length) {
        throw Error(ErrorKind::kIntegrity, what + ": holds " + std::to_string(payload.size()) + " bytes, index says " +
                                               std::to_string(raw_length));
      }
      return payload;
    case kZstd: {
      StageTimer timer(cpu, Stage::kDecompress);
      decompress(payload, raw_length, raw, what);
      return raw;
    }
    default:
      throw Error(ErrorKind::kIntegrity, what + ": unknown compression tag " + std::to_string(scratch[0]));
  }
}

}  // namespace keel::engine
