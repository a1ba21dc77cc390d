// S3 Object Lock rules: the retention and legal hold a new version gets, and
// which changes and deletions its lock allows. COMPLIANCE retention can be
// extended but never shortened or removed until it expires; GOVERNANCE
// retention yields to a request that bypasses it (the bucket's owner with
// x-amz-bypass-governance-retention: true); a legal hold blocks deletion
// until it is lifted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gateway/metadata.h"
#include "gateway/request.h"

namespace keel::gateway {

// "GOVERNANCE" or "COMPLIANCE"; throws S3Error (`error_code`) otherwise.
void check_retention_mode(const std::string& mode, std::string_view error_code);

// A bucket's default as read from <DefaultRetention> fields; throws S3Error
// MalformedXML unless the mode is valid and exactly one of days and years is
// given, InvalidRetentionPeriod unless that one is positive (and at most 100 years).
DefaultRetention make_default_retention(const std::string& mode, std::optional<int> days, std::optional<int> years);

// The lock of a version written now by `request` (x-amz-object-lock-mode,
// -retain-until-date, -legal-hold) in `bucket`, or its default retention.
// `uploads_body`: the request carries the object's bytes (PutObject), which
// must then come with Content-MD5 or a checksum. Throws S3Error
// InvalidRequest (lock headers on a bucket without Object Lock, or an
// upload without an integrity check), InvalidArgument (a bad header).
ObjectLock lock_for_new_version(const S3Request& request, const BucketRecord& bucket, int64_t now_ns,
                                bool uploads_body);

// Whether `request` has lock headers (x-amz-object-lock-*).
bool has_lock_headers(const S3Request& request);

// Throws S3Error AccessDenied when `lock` forbids deleting its version.
void check_deletable(const ObjectLock& lock, bool bypass_governance, int64_t now_ns);

// Throws S3Error AccessDenied when replacing retention `current` by
// `requested` would weaken an unexpired lock that the request may not bypass.
void check_retention_change(const ObjectLock& current, const ObjectLock& requested, bool bypass_governance,
                            int64_t now_ns);

// The ISO 8601 date S3 documents use ("2030-01-01T00:00:00Z", optionally
// with fractional seconds) as nanoseconds; nullopt when malformed.
std::optional<int64_t> parse_iso8601(const std::string& text);

}  // namespace keel::gateway
