// Restores a snapshot (or part of it) into a directory.
//
// The planner walks the snapshot's trees (from the catalog, no target round
// trips), creates directories and sparse files of the right size, maps each
// needed blob to the file ranges it fills (a blob used several times is
// fetched once), groups blobs by pack and coalesces neighbours into ranged
// reads. Reader threads fetch, check, decrypt and decompress, and pwrite
// straight to file offsets, in any order; holes are never written. Each file
// is written under a partial name beside its destination
// (".NAME.keel-partial-…"), verified against its XXH3-128 when complete and
// only then renamed into place, so a destination holds either what was there
// before or the verified file; a file that fails is removed, and partial
// files a killed restore left are removed by the next restore into their
// directory. Metadata (owners, modes, xattrs, times) comes last, directories
// after their contents. A directory whose tree cannot be read fails alone.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "engine/repository.h"
#include "engine/stage_cpu.h"
#include "util/error.h"
#include "util/file_system.h"

namespace keel::engine {

// What to do with a file that already exists at its destination.
enum class Overwrite {
  kAlways,     // replace it
  kIfChanged,  // keep it if its size and XXH3-128 match the snapshot: a restore
               // that was interrupted resumes without fetching again
  kNever,      // keep whatever is there
};

struct RestoreOptions {
  std::string target_dir;
  Overwrite overwrite = Overwrite::kAlways;
  // Restore the contents of this path of the snapshot into target_dir
  // (a file lands as target_dir/<name>). Empty: the whole snapshot.
  std::string subpath;
  // If not empty, only these snapshot paths (and what lies below them) are
  // restored, at their full path under target_dir.
  std::vector<std::string> includes;
  bool verify = true;          // check each restored file's XXH3-128
  bool verify_from_disk = false;  // ... after flushing it and dropping it from the page cache
  // Fetch, decrypt, decompress and check every byte (each chunk must hash
  // back to its id) but write nothing: a drill that proves readability.
  bool verify_only = false;
  // Restore only this fraction of the files, picked at random by `sample_seed`.
  double sample = 1.0;
  uint64_t sample_seed = 0;
  size_t readers = 0;          // ranged reads in flight; 0: adaptive
  uint64_t coalesce_gap = 1ull << 20;  // join reads whose gap is at most this
  uint64_t max_read = 16ull << 20;     // but never read more than this at once
  uint64_t memory_budget = 256ull << 20;  // bytes of reads in flight, at most
  const std::atomic<bool>* cancel = nullptr;
  // Where files and directories are created and written; null: the real
  // file system (tests inject faults through util/fault_injecting_file_system.h).
  FileSystem* file_system = nullptr;
};

struct RestoreProgress {
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // When the first file was complete (restored and verified); zero until then.
  std::atomic<int64_t> first_file_ns{0};
  std::atomic<uint64_t> files_done{0};
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> errors{0};
  StageCpu stage_cpu;  // CPU time by stage so far (kRestoreStages)
  uint64_t files_total = 0;
  uint64_t bytes_total = 0;
};

struct RestoreFailure {
  std::string path;
  std::string reason;
  // kIntegrity or kNotFound: the repository's data for it is damaged or
  // missing; kTargetIo: it could not be written here; others as named.
  ErrorKind kind = ErrorKind::kFailure;

  // Whether it comes from damage in the repository, which trying again
  // will not mend (as opposed to a local write that failed).
  bool damaged() const { return kind == ErrorKind::kIntegrity || kind == ErrorKind::kNotFound; }
};

// Every file of the selection is counted once: verified, unverified, kept or failed.
struct RestoreResult {
  uint64_t files = 0;             // files of the snapshot selected (hard links once)
  uint64_t files_verified = 0;    // in place and matching their checksum (verify_only: every chunk checked)
  uint64_t files_unverified = 0;  // in place, not checked (verify off)
  uint64_t files_kept = 0;        // left as found: correct already (if-changed) or present (never)
  uint64_t files_failed = 0;      // not restored; their destination is as it was before
  uint64_t partial_files_removed = 0;  // left by an interrupted restore
  size_t peak_readers = 0;  // most ranged reads the adaptive limit allowed at once
  uint64_t dirs = 0;
  uint64_t bytes = 0;             // size of the files selected
  std::array<double, kStageCount> stage_cpu_seconds{};  // by Stage
  double cpu_seconds = 0;  // the process's CPU time (user + system) by the end, start-up included
  std::vector<RestoreFailure> failures;  // files and other entries (directories, links, metadata)

  bool damaged() const;  // any failure damaged()
};

RestoreResult run_restore(Repository& repo, const catalog::SnapshotRecord& snapshot, const RestoreOptions& options,
                          RestoreProgress& progress);

// Writes one file of a snapshot to `fd` in order (a pipe is fine), keeping
// `prefetch` chunk reads in flight, and checks its XXH3-128 at the end.
// Returns the bytes written. Throws Error(kIntegrity) if the content does not
// match, kNotFound if `path` is missing, kUsage if it is not a file.
uint64_t stream_file(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& path, int fd,
                     size_t prefetch = 8);

// Walks a snapshot's trees depth-first from `start` ("/" for the root),
// calling `fn` with each entry's path (`start` excluded).
void walk_snapshot(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& start,
                   const std::function<void(const std::string& path, const TreeEntry& entry)>& fn);

// The entry at `path` ("/" gives a synthetic directory holding the root).
// Throws Error(kNotFound) naming the snapshot if there is none.
TreeEntry find_entry(Repository& repo, const catalog::SnapshotRecord& snapshot, const std::string& path);

}  // namespace keel::engine
