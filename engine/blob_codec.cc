#include "engine/blob_codec.h"

#include "engine/open_into.h"
#include "engine/seal_parts.h"
#include "util/error.h"

namespace keel::engine {
namespace {
enum : uint8_t { kRaw = 0, kZstd = 1 };
}

void seal_blob(const Key256& key, Compressor* compressor, const Id& id, ByteView raw, Bytes& sealed,
               StageClock* clock) {
  const std::optional<ByteView> frame = compressor ? compressor->compress(raw) : std::nullopt;
  if (clock) clock->lap(Stage::kCompress);
  // The tag, then the payload where it lies: the chunk as read, or the frame
  // in the compressor's buffer (no copy behind the tag).
  static constexpr uint8_t kRawTag[] = {kRaw};
  static constexpr uint8_t kZstdTag[] = {kZstd};
  if (frame) {
    seal_parts(key, kZstdTag, *frame, id.view(), sealed);
  } else {
    seal_parts(key, kRawTag, raw, id.view(), sealed);
  }
  if (clock) clock->lap(Stage::kEncrypt);
}

ByteView open_blob(const Key256& key, const Id& id, ByteView sealed, uint32_t raw_length, Bytes& raw, Bytes& scratch,
                   const std::string& what, StageCpu* cpu, std::span<uint8_t> placed) {
  ByteView opened;
  {
    StageTimer timer(cpu, Stage::kDecrypt);
    opened = open_sealed_into(key, sealed, id.view(), scratch, what);
  }
  if (opened.empty()) throw Error(ErrorKind::kIntegrity, what + ": empty blob");
  const ByteView payload = opened.subspan(1);
  switch (opened[0]) {
    case kRaw:
      if (payload.size() != raw_length) {
        throw Error(ErrorKind::kIntegrity, what + ": holds " + std::to_string(payload.size()) + " bytes, index says " +
                                               std::to_string(raw_length));
      }
      return payload;
    case kZstd: {
      StageTimer timer(cpu, Stage::kDecompress);
      if (!placed.empty() && placed.size() == raw_length) return decompress_to(payload, placed, what);
      return decompress_into(payload, raw_length, raw, what);
    }
    default:
      throw Error(ErrorKind::kIntegrity, what + ": unknown compression tag " + std::to_string(opened[0]));
  }
}

}  // namespace keel::engine
