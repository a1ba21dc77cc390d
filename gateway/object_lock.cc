#include "gateway/object_lock.h"

#include <algorithm>
#include <ctime>
#include <optional>

#include "gateway/s3_error.h"
#include "targets/s3/sigv4.h"

namespace keel::gateway {

namespace {

constexpr int64_t kNsPerDay = 86'400'000'000'000;

LegalHold legal_hold_from(const std::string& value) {
  if (value == "ON") return LegalHold::kOn;
  if (value == "OFF") return LegalHold::kOff;
  if (value.empty()) return LegalHold::kNone;
  throw S3Error("InvalidArgument", "x-amz-object-lock-legal-hold must be ON or OFF, not '" + value + "'");
}

}  // namespace

void check_retention_mode(const std::string& mode, std::string_view error_code) {
  if (mode != "GOVERNANCE" && mode != "COMPLIANCE") {
    throw S3Error(error_code, "the retention mode must be GOVERNANCE or COMPLIANCE, not '" + mode + "'");
  }
}

DefaultRetention make_default_retention(const std::string& mode, std::optional<int> days, std::optional<int> years) {
  check_retention_mode(mode, "MalformedXML");
  if (days.has_value() == years.has_value()) {
    throw S3Error("MalformedXML", "a default retention needs <Days> or <Years>, not both");
  }
  // As AWS: a period must be positive, at most 100 years.
  constexpr int kMaxDays = 36500, kMaxYears = 100;
  const int period = days.value_or(years.value_or(0));
  if (period <= 0 || period > (days ? kMaxDays : kMaxYears)) {
    throw S3Error("InvalidRetentionPeriod", "the default retention period must be a positive number of days "
                                            "(at most 36500) or years (at most 100), not " +
                                                std::to_string(period));
  }
  return {mode, days.value_or(0), years.value_or(0)};
}

bool has_lock_headers(const S3Request& request) {
  return request.has_header("x-amz-object-lock-mode") || request.has_header("x-amz-object-lock-retain-until-date") ||
         request.has_header("x-amz-object-lock-legal-hold");
}

ObjectLock lock_for_new_version(const S3Request& request, const BucketRecord& bucket, int64_t now_ns,
                                bool uploads_body) {
  ObjectLock lock;
  if (has_lock_headers(request)) {
    if (!bucket.object_lock) {
      throw S3Error("InvalidRequest", "bucket '" + bucket.name + "' was not created with Object Lock enabled");
    }
    // As AWS: a locked upload must carry an integrity check. A SHA-256 of the
    // payload (x-amz-content-sha256 in hex, or signed aws-chunked chunks),
    // which the gateway verifies as the body streams, is one too: SDKs older
    // than the default checksums send only that (a deliberate difference).
    const std::string payload_hash = request.header("x-amz-content-sha256");
    const bool checked = request.has_header("content-md5") ||
                         targets::s3::is_lower_hex_sha256(payload_hash) ||
                         payload_hash.starts_with("STREAMING-AWS4-HMAC-SHA256-PAYLOAD") ||
                         std::any_of(request.headers.begin(), request.headers.end(),
                                     [](const auto& h) { return h.first.starts_with("x-amz-checksum-") &&
                                                                h.first != "x-amz-checksum-algorithm"; }) ||
                         request.header("x-amz-trailer").starts_with("x-amz-checksum-");
    if (uploads_body && !checked) {
      throw S3Error("InvalidRequest",
                    "an upload with Object Lock headers needs Content-MD5, an x-amz-checksum or a SHA-256 of the payload");
    }
    const std::string mode = request.header("x-amz-object-lock-mode");
    const std::string until = request.header("x-amz-object-lock-retain-until-date");
    if (mode.empty() != until.empty()) {
      throw S3Error("InvalidArgument",
                    "x-amz-object-lock-mode and x-amz-object-lock-retain-until-date go together");
    }
    if (!mode.empty()) {
      check_retention_mode(mode, "InvalidArgument");
      const auto until_ns = parse_iso8601(until);
      if (!until_ns) throw S3Error("InvalidArgument", "x-amz-object-lock-retain-until-date '" + until + "' is not ISO 8601");
      if (*until_ns <= now_ns) throw S3Error("InvalidArgument", "the retain-until date must be in the future");
      lock.mode = mode;
      lock.retain_until_ns = *until_ns;
    }
    lock.legal_hold = legal_hold_from(request.header("x-amz-object-lock-legal-hold"));
  }
  const DefaultRetention& fallback = bucket.default_retention;
  if (lock.mode.empty() && !fallback.mode.empty()) {
    lock.mode = fallback.mode;
    // Years of 365 days.
    lock.retain_until_ns = now_ns + kNsPerDay * (fallback.days > 0 ? fallback.days : int64_t{365} * fallback.years);
  }
  return lock;
}

void check_deletable(const ObjectLock& lock, bool bypass_governance, int64_t now_ns) {
  if (lock.legal_hold == LegalHold::kOn) throw S3Error("AccessDenied", "the version is under a legal hold");
  if (lock.mode.empty() || lock.retain_until_ns <= now_ns) return;
  if (lock.mode == "COMPLIANCE") throw S3Error("AccessDenied", "the version is under COMPLIANCE retention");
  if (!bypass_governance) {
    throw S3Error("AccessDenied", "the version is under GOVERNANCE retention; the bucket's owner may bypass it with "
                                  "x-amz-bypass-governance-retention: true");
  }
}

void check_retention_change(const ObjectLock& current, const ObjectLock& requested, bool bypass_governance,
                            int64_t now_ns) {
  if (current.mode.empty() || current.retain_until_ns <= now_ns) return;
  // Any change of mode alters the lock (GOVERNANCE to COMPLIANCE too, as AWS has it).
  const bool weaker = requested.mode != current.mode || requested.retain_until_ns < current.retain_until_ns;
  if (!weaker) return;
  if (current.mode == "COMPLIANCE") {
    throw S3Error("AccessDenied", "COMPLIANCE retention can be extended but not shortened, relaxed or removed");
  }
  if (!bypass_governance) {
    throw S3Error("AccessDenied", "shortening, removing or changing the mode of GOVERNANCE retention needs the bucket's owner with "
                                  "x-amz-bypass-governance-retention: true");
  }
}

std::optional<int64_t> parse_iso8601(const std::string& text) {
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  int64_t nanos = 0;
  if (*rest == '.') {
    int64_t scale = 100'000'000;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest) {
      nanos += (*rest - '0') * scale;
      scale /= 10;
    }
  }
  if (std::string_view(rest) != "Z" && std::string_view(rest) != "+00:00") return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) * 1'000'000'000 + nanos;
}

}  // namespace keel::gateway
