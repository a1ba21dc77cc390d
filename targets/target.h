// The seam every object store implements: the local directory today, S3 over
// HTTP and the RDMA data plane behind the same interface. Keys are relative to
// the repository root ("config", "packs/3f/3fa2..."); a target maps them onto
// its own namespace (a directory, a bucket prefix).
//
// All methods are safe to call from several threads at once. Failures throw
// keel::Error: kNotFound for a missing key, kTargetIo for everything else,
// with the target and key in the message; an error that may go away when
// tried again (throttling, a timeout, a dropped connection) is transient
// (util/error.h). A bare target (local/, s3/, memory/) does I/O and nothing
// else; retries, limits, metrics and fault injection are decorators
// (target_decorator.h) that open_target.cc stacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "targets/retention.h"
#include "util/bytes.h"

namespace keel::targets {

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  // Object Lock: the retention head() found (list() leaves it empty).
  std::optional<Retention> retention = {};
  // list(): when the object was last written, in Unix seconds by the
  // store's clock (S3 LastModified, a file's mtime), which no writer sets:
  // what prune believes of a condemnation's date (engine/condemnation.h).
  // head() leaves it 0.
  int64_t modified_unix = 0;
};

// One object streamed in parts, as an S3 multipart upload is. Parts are
// numbered from 1 in byte order and may be written concurrently and out of
// order; `offset` is the part's position in the object. Nothing is visible
// under the key until commit() returns; then the whole object is, durably.
// A commit tried again after one whose reply was lost succeeds if the object
// was committed. Destroying an upload that was not committed aborts it.
class Upload {
 public:
  virtual ~Upload() = default;
  virtual void write_part(uint32_t part_number, uint64_t offset, ByteView data) = 0;
  virtual void commit() = 0;
  virtual void abort() noexcept = 0;
  // The retention the object gets (Target::set_write_retention), if any.
  virtual std::optional<Retention> retention() const { return std::nullopt; }
};

class Target {
 public:
  virtual ~Target() = default;

  // For messages: "/srv/backup" or "s3://bucket/prefix".
  virtual std::string describe() const = 0;
  // Every part but the last must be at least this large (S3: 5 MiB).
  virtual uint64_t min_part_size() const { return 0; }
  // Ranged reads worth keeping in flight: a remote store hides its latency
  // behind many; 0 lets the caller size it by CPU cores.
  virtual size_t read_concurrency() const { return 0; }
  // A counter that grows whenever the target pushed back (the retrying
  // decorator's retries); readers back off when it moves.
  virtual uint64_t throttle_events() const { return 0; }
  // Named counters of how the target moved data, for --json output: each
  // decorator adds its own (retries, per-operation metrics) to those of the
  // target below it (S3: requests and bytes over HTTP and RDMA); none by default.
  virtual std::vector<std::pair<std::string, uint64_t>> transfer_stats() const { return {}; }

  virtual std::unique_ptr<Upload> start_upload(const std::string& key) = 0;
  // Whole-object put, atomic and durable when it returns.
  virtual void put(const std::string& key, ByteView data) = 0;
  // Reads [offset, offset + out.size()) into `out`; returns the bytes read,
  // fewer than out.size() only where the object ends.
  virtual size_t get_range(const std::string& key, uint64_t offset, std::span<uint8_t> out) = 0;
  virtual std::optional<ObjectInfo> head(const std::string& key) = 0;
  // Calls `fn` for every object whose key starts with `prefix`, in no
  // particular order, with its size and modified_unix.
  virtual void list(const std::string& prefix, const std::function<void(const ObjectInfo&)>& fn) = 0;
  // Removing a missing key is not an error.
  virtual void remove(const std::string& key) = 0;
  // Aborts uploads that were started at least `min_age` ago and never
  // committed (left by a crashed run); returns how many. The age keeps
  // uploads of backups running right now safe.
  virtual size_t remove_stale_uploads(std::chrono::seconds min_age) = 0;

  // Object Lock (docs/immutable.md). Whether the store can lock objects at
  // this location (S3: the bucket's ObjectLockEnabled); false by default.
  virtual bool object_lock_enabled() { return false; }
  // From now on, put and start_upload give the objects `rule` picks their
  // retention (nullopt: none). Throws Error(kUsage) where the target cannot lock.
  virtual void set_write_retention(const std::optional<WriteRetention>& rule);
  // Sets `key`'s retention to `retention`, which must not be shorter than
  // what it has (the store refuses that): S3 PutObjectRetention, no data
  // moves. Throws Error(kUsage) where the target cannot lock.
  virtual void extend_retention(const std::string& key, const Retention& retention);

  // Whole object; built on head + get_range.
  Bytes get(const std::string& key);
};

}  // namespace keel::targets
