// A backup run: walks a Source, stores what changed, and commits a snapshot
// only after every pack it references is durable on the target.
//
// Pipeline: the calling thread walks the source, reads changed files and
// cuts them into chunks; a worker pool names each chunk (keyed HMAC),
// dedupes it, compresses and seals it; pack writers stream packs to the
// target in parts on an upload pool. Bounded queues and byte budgets cap
// memory whatever the input size; a slow target slows the readers.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "engine/stage_cpu.h"
#include "engine/repository.h"
#include "engine/source.h"

namespace keel::engine {

struct BackupOptions {
  std::vector<std::string> tags;
  std::string host;           // empty: this machine's hostname
  std::optional<Id> parent;   // empty: the latest snapshot of the same host and paths
  bool reread_unchanged = false;
  size_t workers = 0;         // 0: one per core
  size_t memory_budget = 256ull << 20;  // chunks and parts in flight
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by SIGINT) to stop early
  bool copy_catalog = true;   // upload a copy of the catalog after the snapshot (catalog_copy.h)
  // Never delete or overwrite on the target (credentials that may only
  // create, docs/immutable.md): a lease written once, no clean-up.
  bool append_only = false;
  std::optional<int> compression_level;  // empty: the repository's (compress.h)
};

// Live counters, updated by the run and read by a progress display.
struct BackupProgress {
  std::atomic<uint64_t> files{0};
  std::atomic<uint64_t> dirs{0};
  std::atomic<uint64_t> bytes{0};        // logical bytes of the files seen
  std::atomic<uint64_t> bytes_read{0};   // bytes read from changed files
  std::atomic<uint64_t> bytes_added{0};  // bytes stored on the target
  std::atomic<uint64_t> chunks_added{0};
  std::atomic<uint64_t> errors{0};
  StageCpu stage_cpu;           // CPU time by stage so far
  uint64_t expected_bytes = 0;  // the parent snapshot's size, for an ETA; 0 if none
};

struct SkippedItem {
  std::string path;
  std::string reason;
};

struct BackupResult {
  catalog::SnapshotRecord snapshot;
  std::vector<SkippedItem> skipped;
  size_t peak_buffered_bytes = 0;
  std::array<double, kStageCount> stage_cpu_seconds{};  // by Stage
  double cpu_seconds = 0;  // the process's CPU time (user + system) by the end, start-up included
  std::string catalog_copy_error;  // why the catalog copy failed; empty if it did not
};

// The walker's read buffers: one max-size chunk (the unchunked tail carried
// over from the buffer before) plus one read, in whole huge pages. No
// larger: the walker outruns the workers, so every buffer the pool allows
// is filled, and each is fresh memory once per process (the kernel clears
// it: 3-6 ms of CPU per MiB on the development VM). 10 MiB for the default
// 8 MiB chunks, where twice the chunk (16 MiB) was 6 MiB more per buffer.
size_t read_buffer_size(const ChunkerParams& chunker);

// How many read buffers a backup may have out: chunks in flight pin the
// buffers they lie in, two more for the walker; at most one a worker, within
// half the memory budget. The walker outruns the workers, so it fills every
// buffer it may have, each fresh memory once per process; on two cores four
// buffers of 10 MiB kept both as busy as six did (docs/performance.md,
// "Smaller read buffers"), with 25-30 MiB less peak memory.
size_t read_buffer_count(size_t buffer_size, size_t workers, size_t memory_budget);

BackupResult run_backup(Repository& repo, Source& source, const BackupOptions& options, BackupProgress& progress,
                        const std::function<void(const SkippedItem&)>& on_skip = {});

}  // namespace keel::engine
