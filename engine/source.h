// The seam between agents (filesystem, stdin, block image, gateway) and the
// backup engine. An agent walks its data and reports it to a SourceSink; the
// engine decides what to read (unchanged files are not opened) and stores it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "engine/node.h"

namespace keel::engine {

// A run of file data read by FileReader::read.
struct Extent {
  uint64_t offset = 0;  // position in the file; at the end, the file's size
  size_t length = 0;    // 0: end of file
};

// Reads one file's content in order, skipping holes: each call fills the
// front of `buf` with the next data and says where in the file it lies.
// Offsets only grow; a gap between one extent's end and the next offset is a
// hole that reads as zeros. The end-of-file extent (length 0) carries the
// file's size as its offset, so a trailing hole is a gap like any other.
class FileReader {
 public:
  virtual ~FileReader() = default;
  virtual Extent read(std::span<uint8_t> buf) = 0;
  // The next extent if it can be read without waiting for a device (from
  // the page cache), perhaps shorter than read() would make it; nullopt
  // where it cannot, and read() then reads it. A backup counts such a read
  // as the CPU work it is, without reading the thread's CPU clock around it.
  virtual std::optional<Extent> read_cached(std::span<uint8_t> /*buf*/) { return std::nullopt; }
};

using OpenFile = std::function<std::unique_ptr<FileReader>()>;

class SourceSink {
 public:
  virtual ~SourceSink() = default;

  // Directories nest: enter_dir, then its entries in name order, then
  // leave_dir. The first enter_dir of a walk opens the snapshot's root.
  virtual void enter_dir(const NodeMeta& dir) = 0;
  virtual void leave_dir() = 0;

  // Any non-directory. For files the sink calls `open` only if it needs
  // the content; `open` and the reader throw keel::Error when the file cannot
  // be read, which the sink reports and skips. meta.size is the size at stat
  // time; the content read decides what is stored.
  virtual void add_node(const NodeMeta& meta, const OpenFile& open) = 0;

  // An item the agent could not back up (vanished, unreadable directory):
  // reported, counted, and the backup goes on.
  virtual void skip(const std::string& path, const std::string& reason) = 0;
};

class Source {
 public:
  virtual ~Source() = default;
  // Absolute paths this source covers, for the snapshot record.
  virtual std::vector<std::string> paths() const = 0;
  virtual void walk(SourceSink& sink) = 0;
  // True for a source whose items only make sense whole (a stream): an
  // item it cannot back up fails the backup, and no snapshot is saved.
  virtual bool all_or_nothing() const { return false; }
};

}  // namespace keel::engine
