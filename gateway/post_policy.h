// The policy document of a browser-based POST upload: base64 JSON with an
// expiration and the conditions every form field must meet, as S3 defines it
// ("Creating a POST policy"). Exact matches ({"acl": "private"} or ["eq",
// "$acl", "private"]), prefixes (["starts-with", "$key", "user/"]) and
// ["content-length-range", min, max]; condition names and operators in any
// case. Every field of the form must be named by a condition, except those
// that carry the upload or its signature (kExemptFields), x-ignore-* and
// x-amz-checksum-* (a checksum only narrows what the upload may be: the
// object is refused unless it matches).
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/request.h"

namespace keel::gateway {

class PostPolicy {
 public:
  // Decodes the form's `policy` field. Throws S3Error InvalidPolicyDocument
  // (bad base64 or JSON, no or a malformed expiration, no conditions, an
  // empty or unknown condition, a bad content-length-range).
  static PostPolicy parse(std::string_view base64_policy);

  // Checks the policy against the form at `now`. `fields`: names lower case,
  // with "bucket" (the request's) and "key" (${filename} already replaced).
  // Throws S3Error AccessDenied "Invalid according to Policy: ..." when it
  // has expired, a condition fails or a field has no condition.
  void check(const NameValues& fields, std::time_t now) const;

  // The file's size against content-length-range: S3Error EntityTooSmall or
  // EntityTooLarge. max_size() is the most that may be uploaded.
  void check_size(uint64_t size) const;
  uint64_t max_size() const { return max_size_; }

  std::time_t expiration() const { return expiration_; }

 private:
  struct Condition {
    bool prefix = false;  // starts-with, else an exact match
    std::string field;    // lower case, without '$'
    std::string value;
  };
  std::time_t expiration_ = 0;
  std::vector<Condition> conditions_;
  uint64_t min_size_ = 0;
  uint64_t max_size_ = UINT64_MAX;
};

// The fields no policy condition needs to name: the upload itself and its
// signature (lower case; also every field that starts with x-ignore- or
// x-amz-checksum-).
inline constexpr std::string_view kExemptFields[] = {"awsaccesskeyid", "file", "policy", "signature",
                                                     "x-amz-signature"};

}  // namespace keel::gateway
