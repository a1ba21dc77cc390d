#include "gateway/sigv2_verify.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "gateway/http_date.h"
#include "gateway/s3_error.h"
#include "util/bytes.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

// The query parameters a V2 signature covers (as botocore and s3cmd sign them).
const std::set<std::string, std::less<>> kSignedSubresources = {
    "accelerate", "acl", "analytics", "cors", "delete", "inventory", "legal-hold", "lifecycle", "location",
    "logging", "metrics", "notification", "object-lock", "partNumber", "policy", "replication",
    "requestPayment", "response-cache-control", "response-content-disposition", "response-content-encoding",
    "response-content-language", "response-content-type", "response-expires", "restore", "retention", "select",
    "select-type", "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
    "versions", "website"};

struct V2Claim {
  std::string access_key;
  std::string signature;
  bool presigned = false;
};

V2Claim claim_of(const S3Request& request) {
  const std::string authorization = request.header("authorization");
  if (!authorization.empty()) {
    const std::string credentials = authorization.substr(4);  // after "AWS "
    const size_t colon = credentials.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == credentials.size()) {
      throw S3Error("InvalidArgument", "the Authorization header is not 'AWS ACCESSKEY:SIGNATURE'");
    }
    return {credentials.substr(0, colon), credentials.substr(colon + 1), false};
  }
  const auto need = [&](std::string_view name) {
    auto value = request.query_value(name);
    if (!value || value->empty()) {
      throw S3Error("AccessDenied", "a Signature Version 2 URL needs AWSAccessKeyId, Expires and Signature; " +
                                        std::string(name) + " is missing");
    }
    return *value;
  };
  return {need("AWSAccessKeyId"), need("Signature"), true};
}

// Checks the request's date (header form) or expiry (query form) against the clock.
void check_v2_time(const S3Request& request, const V2Claim& claim, std::time_t now) {
  if (claim.presigned) {
    const std::string expires = request.query_value("Expires").value_or("");
    if (expires.empty() || expires.size() > 12 || expires.find_first_not_of("0123456789") != std::string::npos) {
      throw S3Error("AccessDenied", "Expires '" + expires + "' is not seconds since the epoch");
    }
    if (now > static_cast<std::time_t>(std::stoll(expires))) throw S3Error("AccessDenied", "the URL has expired");
    return;
  }
  const std::string amz_date = request.header("x-amz-date");
  const std::string date = amz_date.empty() ? request.header("date") : amz_date;
  std::time_t signed_at = parse_http_date(date);
  if (signed_at < 0) signed_at = parse_amz_date(date);
  if (signed_at < 0) {
    throw S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header");
  }
  if (signed_at > now + kMaxClockSkewSeconds || signed_at < now - kMaxClockSkewSeconds) {
    throw S3Error("RequestTimeTooSkewed", "the request was signed at '" + date +
                                              "', more than 15 minutes from the server's clock");
  }
}

}  // namespace

bool signed_with_v2(const S3Request& request) {
  const std::string authorization = request.header("authorization");
  if (!authorization.empty()) return authorization.starts_with("AWS ");
  return request.has_query("Signature") || request.has_query("AWSAccessKeyId");
}

std::string sigv2_string_to_sign(const S3Request& request, const std::string& date, bool bucket_slash) {
  std::string out = request.method + "\n" + request.header("content-md5") + "\n" + request.header("content-type") +
                    "\n" + date + "\n";
  std::map<std::string, std::string> amz;  // sorted by name; repeated headers joined with ','
  for (const auto& [name, value] : request.headers) {
    if (!name.starts_with("x-amz-")) continue;
    auto [at, fresh] = amz.try_emplace(name, std::string(trim_blanks(value)));
    if (!fresh) at->second += "," + std::string(trim_blanks(value));
  }
  for (const auto& [name, value] : amz) out += name + ":" + value + "\n";
  // The resource as the client addressed it (still percent-encoded), with the bucket of a virtual host.
  std::string path = request.target.substr(0, request.target.find('?'));
  if (request.virtual_hosted) out += "/" + request.bucket;
  if (bucket_slash && request.key.empty() && !request.bucket.empty() && !path.ends_with('/')) path += '/';
  out += path;
  std::vector<std::pair<std::string, std::string>> subresources;
  for (const auto& parameter : request.query) {
    if (kSignedSubresources.contains(parameter.first)) subresources.push_back(parameter);
  }
  std::stable_sort(subresources.begin(), subresources.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < subresources.size(); ++i) {
    out += (i == 0 ? "?" : "&") + subresources[i].first;
    if (!subresources[i].second.empty()) out += "=" + subresources[i].second;
  }
  return out;
}

std::string sigv2_signature(const std::string& secret, const std::string& to_sign) {
  std::array<uint8_t, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  HMAC(EVP_sha1(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const uint8_t*>(to_sign.data()),
       to_sign.size(), digest.data(), &length);
  return to_base64(ByteView(digest.data(), length));
}

namespace {

// The user of `access_key`, when they may sign with Version 2.
const User& v2_user(const std::vector<User>& users, const std::string& access_key) {
  const User& user = user_of_access_key(users, access_key);
  if (!user.signature_v2) {
    throw S3Error("InvalidRequest",
                  "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.");
  }
  return user;
}

}  // namespace

const User& verify_post_form_v2(const std::string& access_key, const std::string& policy, const std::string& signature,
                                const std::vector<User>& users) {
  const User& user = v2_user(users, access_key);
  check_post_form_signature(sigv2_signature(user.secret_key, policy), signature, access_key, policy);
  return user;
}

Authentication authenticate_v2(const S3Request& request, const std::vector<User>& users, std::time_t now) {
  const V2Claim claim = claim_of(request);
  const User* user = &v2_user(users, claim.access_key);
  check_v2_time(request, claim, now);
  // The Date line: Expires for a URL; with x-amz-date, AWS signs an empty Date
  // but many clients sign the Date header anyway, so either is accepted.
  std::vector<std::string> dates;
  if (claim.presigned) {
    dates.push_back(request.query_value("Expires").value_or(""));
  } else {
    dates.push_back(request.header("date"));
    if (request.has_header("x-amz-date") && !dates.front().empty()) dates.push_back("");
  }
  std::string to_sign;
  bool matched = false;
  for (const auto& date : dates) {
    for (const bool bucket_slash : {false, true}) {
      to_sign = sigv2_string_to_sign(request, date, bucket_slash);
      if (constant_time_equal(sigv2_signature(user->secret_key, to_sign), claim.signature)) matched = true;
    }
  }
  if (!matched) {
    S3Error error("SignatureDoesNotMatch",
                  "the request signature we calculated does not match the signature you provided; check your key "
                  "and signing method");
    error.details = {{"AWSAccessKeyId", claim.access_key}, {"StringToSign", to_sign},
                     {"SignatureProvided", claim.signature}};
    throw error;
  }
  Authentication auth;
  auth.user = user;
  const std::string payload_hash = request.header("x-amz-content-sha256");
  if (!payload_hash.empty() && payload_hash != "UNSIGNED-PAYLOAD") {
    auth.payload = PayloadKind::kSignedHash;
    auth.payload_sha256 = payload_hash;
    if (payload_hash.size() != 64 || payload_hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw S3Error("InvalidArgument", "a Signature Version 2 request cannot carry an aws-chunked body");
    }
  }
  return auth;
}

}  // namespace keel::gateway
