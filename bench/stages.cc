// Throughput of each stage a chunk goes through during backup and restore,
// on 1 MiB chunks taken in turn from a 64 MiB input (so the data streams from
// memory rather than sitting in cache), next to memcpy as the ceiling.
//
//   keel_bench_stages --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/chunker.h"
#include "engine/compress.h"
#include "engine/crypto.h"
#include "util/checksum.h"
#include "util/hmac_sha256_lanes.h"

namespace keel::engine {
namespace {

constexpr size_t kChunkSize = size_t{1} << 20;
constexpr size_t kInputSize = size_t{64} << 20;
constexpr size_t kChunkCount = kInputSize / kChunkSize;
constexpr int kZstdLevel = 3;

Bytes make_random(size_t size) {
  std::mt19937_64 rng(1);
  Bytes data(size);
  for (size_t i = 0; i < size; i += sizeof(uint64_t)) {
    const uint64_t word = rng();
    std::memcpy(data.data() + i, &word, sizeof word);
  }
  return data;
}

// Prose-like text: words from a fixed vocabulary, the first ones far more
// frequent (as in real text), with punctuation and line breaks.
Bytes make_text(size_t size) {
  static const char* const kWords[] = {
      "the",     "of",       "and",      "to",      "a",        "in",       "is",        "that",
      "for",     "it",       "as",       "with",    "was",      "on",       "be",        "by",
      "backup",  "chunk",    "snapshot", "restore", "pack",     "index",    "catalog",   "target",
      "file",    "directory", "offset",  "length",  "checksum", "key",      "password",  "repository",
      "storage", "engine",   "stream",   "buffer",  "thread",   "worker",   "queue",     "error",
      "retry",   "timeout",  "upload",   "download", "object",  "bucket",   "region",    "policy",
      "daily",   "weekly",   "monthly",  "prune",   "verify",   "drill",    "objective", "recovery",
      "point",   "time",     "window",   "schedule", "report",  "summary",  "metric",    "latency"};
  constexpr size_t word_count = std::size(kWords);
  std::mt19937_64 rng(2);
  std::string text;
  text.reserve(size + 16);
  while (text.size() < size) {
    const uint64_t r = rng();
    // The product of two uniform picks favours low indices.
    text += kWords[((r & 0xffff) % word_count) * (((r >> 16) & 0xffff) % word_count) / word_count];
    const uint64_t punct = (r >> 32) % 20;
    text += punct == 0 ? ".\n" : punct == 1 ? ", " : " ";
  }
  text.resize(size);
  return Bytes(text.begin(), text.end());
}

const Bytes& random_input() {
  static const Bytes data = make_random(kInputSize);
  return data;
}

const Bytes& text_input() {
  static const Bytes data = make_text(kInputSize);
  return data;
}

ByteView chunk_at(const Bytes& input, size_t index) {
  return ByteView(input).subspan((index % kChunkCount) * kChunkSize, kChunkSize);
}

const Key256& bench_key() {
  static const Key256 key = random_key();
  return key;
}

void set_chunk_throughput(benchmark::State& state, size_t chunk_size = kChunkSize) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * chunk_size));
}

void BM_memcpy(benchmark::State& state) {
  const Bytes& input = random_input();
  Bytes out(kChunkSize);
  size_t index = 0;
  for (auto _ : state) {
    std::memcpy(out.data(), chunk_at(input, index++).data(), kChunkSize);
    benchmark::ClobberMemory();
  }
  set_chunk_throughput(state);
}
BENCHMARK(BM_memcpy);

void BM_xxh3_64(benchmark::State& state) {
  const Bytes& input = random_input();
  size_t index = 0;
  for (auto _ : state) benchmark::DoNotOptimize(xxh3_64(chunk_at(input, index++)));
  set_chunk_throughput(state);
}
BENCHMARK(BM_xxh3_64);

// Cuts the whole 64 MiB input per iteration, default sizes (512K/1M/8M).
void BM_chunker(benchmark::State& state) {
  const Bytes& input = random_input();
  const Chunker chunker(ChunkerParams{}, bench_key());
  size_t chunks = 0;
  for (auto _ : state) {
    for (size_t pos = 0; pos < input.size(); ++chunks) pos += chunker.next_cut(ByteView(input).subspan(pos), true);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input.size()));
  state.counters["avg_chunk_KiB"] = static_cast<double>(state.iterations() * input.size()) / chunks / 1024;
}
BENCHMARK(BM_chunker);

// Arg: bytes hashed per call (chunk ids at 1 MiB, small files at 4 KiB).
void BM_keyed_id(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const Bytes& input = random_input();
  size_t index = 0;
  for (auto _ : state) benchmark::DoNotOptimize(keyed_id(bench_key(), chunk_at(input, index++).first(size)));
  set_chunk_throughput(state, size);
}
BENCHMARK(BM_keyed_id)->Arg(4096)->Arg(kChunkSize);

// Chunk ids as a backup worker computes them: a batch of `lanes` chunks named
// together (util/hmac_sha256_lanes.h), 1 MiB each. Arg: chunks per call.
void BM_keyed_ids(benchmark::State& state) {
  const size_t lanes = static_cast<size_t>(state.range(0));
  const Bytes& input = random_input();
  const HmacSha256Lanes hmac(bench_key());
  std::vector<ByteView> chunks(lanes);
  std::vector<HmacSha256Lanes::Digest> ids(lanes);
  size_t index = 0;
  for (auto _ : state) {
    for (ByteView& c : chunks) c = chunk_at(input, index++);
    hmac.digest(chunks, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * lanes * kChunkSize));
}
BENCHMARK(BM_keyed_ids)->Arg(1)->Arg(2)->Arg(4)->Arg(8);

void BM_seal(benchmark::State& state) {
  const Bytes& input = random_input();
  const Id associated = Id::random();
  Bytes box;
  box.reserve(kChunkSize + kSealOverhead);
  size_t index = 0;
  for (auto _ : state) {
    box.clear();
    seal(bench_key(), chunk_at(input, index++), associated.view(), box);
  }
  set_chunk_throughput(state);
}
BENCHMARK(BM_seal);

void BM_open(benchmark::State& state) {
  const Bytes& input = random_input();
  const Id associated = Id::random();
  std::vector<Bytes> boxes;
  for (size_t i = 0; i < kChunkCount; ++i) boxes.push_back(seal(bench_key(), chunk_at(input, i), associated.view()));
  Bytes plain;
  size_t index = 0;
  for (auto _ : state) open_sealed(bench_key(), boxes[index++ % kChunkCount], associated.view(), plain, "bench box");
  set_chunk_throughput(state);
}
BENCHMARK(BM_open);

// Compressor at level 3; counters: input/output size ratio, share stored raw.
void compress_input(benchmark::State& state, const Bytes& input) {
  Compressor compressor(kZstdLevel);
  Bytes out;
  out.reserve(kChunkSize);
  size_t index = 0, stored_raw = 0, bytes_out = 0;
  for (auto _ : state) {
    out.clear();
    if (compressor.compress(chunk_at(input, index++), out)) {
      bytes_out += out.size();
    } else {
      bytes_out += kChunkSize;
      ++stored_raw;
    }
  }
  set_chunk_throughput(state);
  state.counters["ratio"] = static_cast<double>(state.iterations() * kChunkSize) / static_cast<double>(bytes_out);
  state.counters["stored_raw"] = static_cast<double>(stored_raw) / static_cast<double>(state.iterations());
}
void BM_compress_text(benchmark::State& state) { compress_input(state, text_input()); }
void BM_compress_random(benchmark::State& state) { compress_input(state, random_input()); }
BENCHMARK(BM_compress_text);
BENCHMARK(BM_compress_random);

// Plain ZSTD_compress2 at the same level on random data: what the
// compressor's incompressibility probe saves.
void BM_zstd_unprobed_random(benchmark::State& state) {
  const Bytes& input = random_input();
  const std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_compressionLevel, kZstdLevel);
  Bytes out(ZSTD_compressBound(kChunkSize));
  size_t index = 0;
  for (auto _ : state) {
    const ByteView chunk = chunk_at(input, index++);
    benchmark::DoNotOptimize(ZSTD_compress2(ctx.get(), out.data(), out.size(), chunk.data(), chunk.size()));
  }
  set_chunk_throughput(state);
}
BENCHMARK(BM_zstd_unprobed_random);

// Throughput counted in decompressed bytes.
void BM_decompress_text(benchmark::State& state) {
  const Bytes& input = text_input();
  Compressor compressor(kZstdLevel);
  std::vector<Bytes> frames(kChunkCount);
  for (size_t i = 0; i < kChunkCount; ++i) compressor.compress(chunk_at(input, i), frames[i]);
  Bytes out;
  size_t index = 0;
  for (auto _ : state) decompress(frames[index++ % kChunkCount], kChunkSize, out, "bench frame");
  set_chunk_throughput(state);
}
BENCHMARK(BM_decompress_text);

}  // namespace
}  // namespace keel::engine

BENCHMARK_MAIN();
