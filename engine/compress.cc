#include "engine/compress.h"

#include <zstd.h>
#include <zstd_errors.h>

#include <charconv>
#include <cstring>
#include <string>

#include "engine/open_into.h"
#include "util/error.h"
#include "util/huge_pages.h"

namespace keel::engine {

namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* ctx) const { ZSTD_freeCCtx(ctx); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* ctx) const { ZSTD_freeDCtx(ctx); }
};
using CCtxPtr = std::unique_ptr<ZSTD_CCtx, CCtxFree>;

// The probe: slices spread evenly over the chunk, compressed together at a
// fast level. Data that will not shrink (compressed media, archives,
// encrypted files) is random to zstd, and a few slices show it for a small
// fraction of the cost of compressing the whole chunk. The price: a chunk
// whose redundancy lies only in repeats farther apart than a slice (the same
// random block twice), or that would shrink by a few percent at most, is
// stored uncompressed.
constexpr size_t kProbeSlices = 8;
constexpr size_t kProbeSliceSize = 4096;
constexpr size_t kProbeSize = kProbeSlices * kProbeSliceSize;
// Not a negative level: those skip entropy coding of literals, and would
// reject data that shrinks only through it (hex dumps, base64).
constexpr int kProbeLevel = 1;
// The sample must shrink by at least 1/32 (~3%) for the full pass to run.
constexpr size_t kProbeCapacity = kProbeSize - kProbeSize / 32;
// Below this the probe would cost a large share of compressing everything.
constexpr size_t kProbeMinInput = 2 * kProbeSize;

void set_parameter(ZSTD_CCtx* ctx, ZSTD_cParameter parameter, int value, const char* name) {
  const size_t rc = ZSTD_CCtx_setParameter(ctx, parameter, value);
  if (ZSTD_isError(rc)) {
    throw Error(ErrorKind::kUsage, std::string("zstd: cannot set ") + name + " to " + std::to_string(value) + ": " +
                                       ZSTD_getErrorName(rc));
  }
}

CCtxPtr make_cctx(const CompressorParams& params) {
  CCtxPtr ctx(ZSTD_createCCtx());
  if (!ctx) throw Error(ErrorKind::kFailure, "zstd: cannot allocate a compression context");
  set_parameter(ctx.get(), ZSTD_c_compressionLevel, params.level, "the level");
  if (params.window_log) set_parameter(ctx.get(), ZSTD_c_windowLog, params.window_log, "the window log");
  if (params.hash_log) set_parameter(ctx.get(), ZSTD_c_hashLog, params.hash_log, "the hash log");
  if (params.chain_log) set_parameter(ctx.get(), ZSTD_c_chainLog, params.chain_log, "the chain log");
  return ctx;
}

// Compresses `src` into `dst` (capacity `capacity`); returns the frame size,
// or 0 if the frame would not fit.
size_t compress_bounded(ZSTD_CCtx* ctx, ByteView src, uint8_t* dst, size_t capacity) {
  const size_t rc = ZSTD_compress2(ctx, dst, capacity, src.data(), src.size());
  if (!ZSTD_isError(rc)) return rc;
  if (ZSTD_getErrorCode(rc) == ZSTD_error_dstSize_tooSmall) return 0;
  throw Error(ErrorKind::kFailure, std::string("zstd compression failed: ") + ZSTD_getErrorName(rc));
}

}  // namespace

struct Compressor::State {
  CCtxPtr full;
  CCtxPtr probe;
  Bytes sample = Bytes(kProbeSize);
  Bytes sample_frame = Bytes(kProbeCapacity);
  // zstd writes the frame here, and only the frame is copied out: growing
  // the caller's buffer to the chunk's size first zero-filled (and for a
  // fresh buffer faulted in) every byte of it, for frames that are mostly
  // much smaller and often given up.
  AlignedBuffer frame;
  size_t frame_capacity = 0;

  uint8_t* frame_buffer(size_t n) {
    if (n > frame_capacity) {
      frame = allocate_aligned(n);
      frame_capacity = n;
    }
    return frame.get();
  }

  bool sample_shrinks(ByteView data) {
    const size_t stride = (data.size() - kProbeSliceSize) / (kProbeSlices - 1);
    for (size_t i = 0; i < kProbeSlices; ++i) {
      std::memcpy(sample.data() + i * kProbeSliceSize, data.data() + i * stride, kProbeSliceSize);
    }
    return compress_bounded(probe.get(), sample, sample_frame.data(), sample_frame.size()) != 0;
  }
};

int parse_compression(std::string_view text, std::string_view option) {
  if (text == "off") return kCompressionOff;
  if (text == "fast") return kCompressionFast;
  if (text == "default") return kCompressionDefault;
  if (text == "max") return kCompressionMax;
  int level = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), level);
  if (ec != std::errc() || end != text.data() + text.size() || level < kCompressionMinLevel ||
      level > kCompressionMaxLevel) {
    throw Error(ErrorKind::kUsage, std::string(option) + " '" + std::string(text) +
                                       "': expected off, fast, default, max or a zstd level from " +
                                       std::to_string(kCompressionMinLevel) + " to " +
                                       std::to_string(kCompressionMaxLevel) + " (0 is off)");
  }
  return level;
}

std::string compression_name(int level) {
  switch (level) {
    case kCompressionOff: return "off";
    case kCompressionFast: return "fast";
    case kCompressionDefault: return "default";
    case kCompressionMax: return "max";
    default: return std::to_string(level);
  }
}

Compressor::Compressor(const CompressorParams& params) {
  if (params.level == 0 || params.level < ZSTD_minCLevel() || params.level > ZSTD_maxCLevel()) {
    throw Error(ErrorKind::kUsage, "zstd level " + std::to_string(params.level) + " is out of range (" +
                                       std::to_string(ZSTD_minCLevel()) + " to " +
                                       std::to_string(ZSTD_maxCLevel()) + ", not 0)");
  }
  state_ = std::make_unique<State>();
  state_->full = make_cctx(params);
  if (params.probe) state_->probe = make_cctx(CompressorParams{.level = kProbeLevel});
}

Compressor::~Compressor() = default;

std::optional<ByteView> Compressor::compress(ByteView data) {
  if (data.size() < 2) return std::nullopt;  // no frame is smaller
  if (state_->probe && data.size() >= kProbeMinInput && !state_->sample_shrinks(data)) return std::nullopt;

  // A frame of at most size-1 bytes is all that is worth keeping, so zstd
  // may give up as soon as the output reaches that.
  uint8_t* frame = state_->frame_buffer(data.size() - 1);
  const size_t frame_size = compress_bounded(state_->full.get(), data, frame, data.size() - 1);
  if (frame_size == 0) return std::nullopt;
  return ByteView(frame, frame_size);
}

bool Compressor::compress(ByteView data, Bytes& out) {
  const std::optional<ByteView> frame = compress(data);
  if (!frame) return false;
  reserve_huge(out, out.size() + frame->size());
  out.insert(out.end(), frame->begin(), frame->end());
  return true;
}

ByteView decompress_to(ByteView frame, std::span<uint8_t> out, const std::string& what) {
  thread_local const std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) throw Error(ErrorKind::kFailure, "zstd: cannot allocate a decompression context");

  auto corrupt = [&](const std::string& why) { return Error(ErrorKind::kIntegrity, what + ": " + why); };
  const size_t raw_length = out.size();
  const unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) throw corrupt("not a zstd frame");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != raw_length) {
    throw corrupt("zstd frame holds " + std::to_string(declared) + " bytes, expected " + std::to_string(raw_length));
  }
  const size_t rc = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(rc)) throw corrupt(std::string("zstd decompression failed: ") + ZSTD_getErrorName(rc));
  if (rc != raw_length) {
    throw corrupt("zstd frame decoded to " + std::to_string(rc) + " bytes, expected " + std::to_string(raw_length));
  }
  return out;
}

ByteView decompress_into(ByteView frame, size_t raw_length, Bytes& buffer, const std::string& what) {
  try {
    return decompress_to(frame, overwritable(buffer, raw_length), what);
  } catch (const Error&) {
    buffer.clear();
    throw;
  }
}

void decompress(ByteView frame, size_t raw_length, Bytes& out, const std::string& what) {
  out.resize(decompress_into(frame, raw_length, out, what).size());
}

}  // namespace keel::engine
