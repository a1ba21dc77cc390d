// Where a bucket keeps object and part bytes: the seam between the S3
// operations (one code path for every bucket) and the storage modes, raw
// files (raw_files.h) or a keel repository (dedupe_storage.h).
//
// Bytes are written as a stream and committed as one segment reference,
// which the metadata database stores (Segment::file, PartRecord::file) and
// hands back to read a range of an object's segments or to remove them.
// A reference is committed durably before its record is: a crash then loses
// no acknowledged write, and leaves at most bytes no record names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gateway/exchange.h"
#include "gateway/metadata.h"
#include "util/bytes.h"

namespace keel::gateway {

class BucketStorage {
 public:
  virtual ~BucketStorage() = default;

  // One stream of bytes on its way to becoming a segment. Dropping a writer
  // without commit() discards what it wrote.
  class Writer {
   public:
    virtual ~Writer() = default;
    virtual void write(ByteView data) = 0;
    virtual uint64_t size() const = 0;
    // Makes the bytes durable and returns the segment reference.
    virtual std::string commit() = 0;
  };
  virtual std::unique_ptr<Writer> create() = 0;

  // `length` bytes from `first` of the object whose bytes are `segments`, in
  // order. What it needs is opened or located up front, so that an overwrite
  // committed meanwhile cannot break a read in flight.
  virtual std::unique_ptr<BodyProducer> read(const std::vector<Segment>& segments, uint64_t first,
                                             uint64_t length) = 0;

  // A segment no record names any more (best effort: what is left behind
  // goes at the next start-up or garbage collection).
  virtual void remove(const std::string& segment) noexcept = 0;
  // At start-up: removes what no committed record names. Returns how many
  // pieces went.
  virtual size_t remove_orphans(const std::set<std::string>& referenced) = 0;

  // A local directory on the filesystem that holds (or stands for) the
  // bucket's bytes, for the capacity Veeam's SOSAPI reports.
  virtual std::string capacity_path() const = 0;
};

// Copies `length` bytes of `source` through `to`, a new segment's writer
// (CopyObject, UploadPartCopy; the buckets' modes and encryption may differ);
// `observe` sees them as they pass. Returns the committed reference.
std::string copy_bytes(BodyProducer& source, uint64_t length, BucketStorage::Writer& to,
                       const std::function<void(ByteView)>& observe = {});

}  // namespace keel::gateway
