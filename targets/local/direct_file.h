// A file written around the page cache: pack files are written once and
// not read back by the backup that writes them, and a restore's large files
// are not read by the restore either (bar the pieces read back to verify
// them, see read()), so copying them into the page cache costs CPU (the
// copy, allocating and later reclaiming the pages) and evicts the machine's
// working set for nothing.
//
// Packs and large restored files use it. Writes go through O_DIRECT in whole aligned blocks. A write may start and
// end anywhere: the bytes of a block it covers only in part wait in memory
// until the neighbouring writes complete the block (parts of a pack arrive
// in any order, from several threads). finish() writes what is left, the
// file's last partial block, through the page cache. Where the file system
// refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE and network file
// systems), everything goes through the page cache as before. Durability is the caller's fsync,
// as for any file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "util/bytes.h"
#include "util/fd.h"

namespace keel::targets::local {

class DirectFile {
 public:
  static constexpr size_t kBlock = 4096;

  // Creates `path` (it must not exist), with O_DIRECT if `direct` and the
  // file system allows it.
  DirectFile(const std::string& path, bool direct);
  // Takes over `fd`, a file open for writing (and reading, for read());
  // `path` names it in errors.
  DirectFile(UniqueFd fd, const std::string& path, bool direct);
  ~DirectFile();
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  int fd() const { return fd_.get(); }
  bool direct() const;

  // Writes `data` at `offset`. Thread-safe; writes must not overlap.
  void write(ByteView data, uint64_t offset);
  // Reads back `out.size()` bytes at `offset`, all written already (by
  // writes that have returned), wherever they wait: on disk or in a partial
  // block. Thread-safe. Throws Error(kTargetIo) if the file is shorter.
  void read(std::span<uint8_t> out, uint64_t offset);
  // Writes the blocks still partial (the last one) through the page cache.
  // Call once every write has returned, before fsync.
  void finish();
  void close() { fd_.reset(); }

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  using AlignedBlock = std::unique_ptr<uint8_t, AlignedFree>;
  struct Partial {
    AlignedBlock block;
    size_t filled = 0;  // bytes written into it
    size_t end = 0;     // one past the last byte written into it
  };

  void stash(ByteView piece, uint64_t offset);
  void write_aligned(ByteView data, uint64_t offset);
  // With mu_ held (read()).
  void read_blocks(std::span<uint8_t> out, uint64_t offset);
  void read_partial_blocks(std::span<uint8_t> out, uint64_t offset);
  void fall_back_to_buffered();

  std::string path_;
  UniqueFd fd_;
  mutable std::mutex mu_;
  bool direct_ = false;
  // By block offset; a block completed stays until it is written, so that
  // read() finds it in one place or the other.
  std::map<uint64_t, Partial> partial_;
};

}  // namespace keel::targets::local
