// S3's conditional requests: If-Match, If-None-Match, If-Modified-Since and
// If-Unmodified-Since on GET and HEAD (RFC 7232 as S3 applies it), their
// x-amz-copy-source-if-* twins on CopyObject and UploadPartCopy, and
// conditional writes (If-None-Match: * and If-Match on PutObject and
// CompleteMultipartUpload) and conditional deletes (If-Match,
// x-amz-if-match-last-modified-time and x-amz-if-match-size on DeleteObject,
// their ETag, LastModifiedTime and Size twins in a DeleteObjects entry).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gateway/metadata.h"
#include "gateway/request.h"

namespace keel::gateway {

// What a GET or HEAD must answer for the object with this ETag (unquoted)
// and modification time: true to serve it, false for 304 Not Modified.
// Throws S3Error PreconditionFailed.
bool read_conditions_allow(const S3Request& request, const std::string& etag, int64_t modified_ns);

// The x-amz-copy-source-if-* headers against the copy source; throws S3Error
// PreconditionFailed.
void check_copy_source_conditions(const S3Request& request, const std::string& etag, int64_t modified_ns);

// Whether the request is a conditional write (If-None-Match or If-Match).
bool has_write_conditions(const S3Request& request);
// The write's conditions against the key's current version (nullopt or a
// delete marker: none). Throws S3Error `failure` (PreconditionFailed, or
// ConditionalRequestConflict when checked again at commit), NoSuchKey for
// If-Match on a missing key, NotImplemented for If-None-Match other than *.
void check_write_conditions(const S3Request& request, const std::optional<ObjectRecord>& current,
                            std::string_view failure = "PreconditionFailed");

// The conditions of one delete, each absent unless the request names it.
struct DeleteConditions {
  std::optional<std::string> etag;        // an ETag list or "*"
  std::optional<int64_t> modified_s;      // the version's Last-Modified, in seconds
  std::optional<uint64_t> size;

  bool any() const { return etag || modified_s || size; }
  // From DeleteObject's headers. Throws S3Error InvalidArgument when a date or size is malformed.
  static DeleteConditions from_headers(const S3Request& request);
  // From one DeleteObjects <Object> entry's texts (empty: absent).
  static DeleteConditions from_entry(const std::string& etag, const std::string& modified, const std::string& size);
};

// The conditions against `target`, the version the delete would remove or
// hide (a delete marker has no ETag and size 0). Throws S3Error
// PreconditionFailed; a missing target passes, since deleting nothing succeeds.
void check_delete_conditions(const DeleteConditions& conditions, const std::optional<ObjectRecord>& target);

}  // namespace keel::gateway
