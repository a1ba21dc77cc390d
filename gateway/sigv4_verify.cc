#include "gateway/sigv4_verify.h"

#include <algorithm>

#include "gateway/http_date.h"
#include "gateway/s3_error.h"
#include "gateway/sigv2_verify.h"
#include "targets/s3/sigv4.h"
#include "util/error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

namespace sigv4 = keel::targets::s3;

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  while (true) {
    const size_t at = text.find(separator);
    out.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text = text.substr(at + 1);
  }
}

constexpr int kMaxPresignSeconds = 7 * 24 * 3600;

struct Credential {
  std::string access_key;
  std::string date;  // YYYYMMDD
  std::string region;
  std::string scope;  // date/region/s3/aws4_request
};

// What the client claims: who signed, when, over which headers, and the signature.
struct Claim {
  Credential credential;
  std::string amz_date;
  std::vector<std::string> signed_headers;
  std::string signature;
  bool presigned = false;
};

Credential parse_credential(const std::string& text, std::string_view error_code) {
  const auto parts = split(text, '/');
  if (parts.size() != 5 || parts[0].empty() || parts[1].size() != 8 || parts[2].empty() ||
      parts[3] != sigv4::kS3Service || parts[4] != "aws4_request") {
    throw S3Error(error_code, "the credential '" + text + "' is not ACCESSKEY/YYYYMMDD/REGION/s3/aws4_request");
  }
  return {parts[0], parts[1], parts[2], sigv4::credential_scope(parts[1], parts[2])};
}

std::vector<std::string> parse_signed_headers(const std::string& text, std::string_view error_code) {
  auto names = split(text, ';');
  const bool sorted = std::is_sorted(names.begin(), names.end()) &&
                      std::adjacent_find(names.begin(), names.end()) == names.end();
  const bool has_host = std::find(names.begin(), names.end(), "host") != names.end();
  if (text.empty() || !sorted || !has_host) {
    throw S3Error(error_code, "SignedHeaders '" + text + "' must be sorted, unique and include host");
  }
  return names;
}

// x-amz-date, or else the Date header (in ISO 8601 basic or RFC 1123 form),
// as the timestamp the signature covers.
std::string request_date(const S3Request& request) {
  std::string date = request.header("x-amz-date");
  if (date.empty()) date = request.header("date");
  if (date.empty()) throw S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header");
  if (parse_amz_date(date) >= 0) return date;
  const std::time_t seconds = parse_http_date(date);
  if (seconds < 0) return date;  // refused by check_time, which names it
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char iso[17];
  std::strftime(iso, sizeof iso, "%Y%m%dT%H%M%SZ", &tm);
  return iso;
}

Claim header_claim(const S3Request& request, const std::string& authorization) {
  constexpr std::string_view kMalformed = "AuthorizationHeaderMalformed";
  const std::string prefix = std::string(sigv4::kSigV4Algorithm) + " ";
  if (!authorization.starts_with(prefix)) {
    throw S3Error("AccessDenied", "only AWS Signature Version 4 (" + std::string(sigv4::kSigV4Algorithm) +
                                      ") is accepted");
  }
  Claim claim;
  std::string credential, signed_headers;
  for (const auto& component : split(std::string_view(authorization).substr(prefix.size()), ',')) {
    const std::string item = std::string(trim_blanks(component));
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (name == "Credential") credential = value;
    else if (name == "SignedHeaders") signed_headers = value;
    else if (name == "Signature") claim.signature = value;
    else throw S3Error(kMalformed, "unexpected '" + name + "' in the Authorization header");
  }
  if (credential.empty() || signed_headers.empty() || claim.signature.empty()) {
    throw S3Error(kMalformed, "the Authorization header needs Credential, SignedHeaders and Signature");
  }
  claim.credential = parse_credential(credential, kMalformed);
  claim.signed_headers = parse_signed_headers(signed_headers, kMalformed);
  claim.amz_date = request_date(request);
  return claim;
}

Claim query_claim(const S3Request& request) {
  constexpr std::string_view kMalformed = "AuthorizationQueryParametersError";
  const auto need = [&](std::string_view name) {
    auto value = request.query_value(name);
    if (!value || value->empty()) throw S3Error(kMalformed, "the presigned URL has no " + std::string(name));
    return *value;
  };
  if (need("X-Amz-Algorithm") != sigv4::kSigV4Algorithm) {
    throw S3Error(kMalformed, "X-Amz-Algorithm must be " + std::string(sigv4::kSigV4Algorithm));
  }
  Claim claim;
  claim.presigned = true;
  claim.credential = parse_credential(need("X-Amz-Credential"), kMalformed);
  claim.amz_date = need("X-Amz-Date");
  claim.signed_headers = parse_signed_headers(need("X-Amz-SignedHeaders"), kMalformed);
  claim.signature = need("X-Amz-Signature");
  return claim;
}

void check_time(const S3Request& request, const Claim& claim, std::time_t now) {
  const std::time_t signed_at = parse_amz_date(claim.amz_date);
  if (signed_at < 0) {
    throw S3Error(claim.presigned ? "AuthorizationQueryParametersError" : "AccessDenied",
                  "X-Amz-Date '" + claim.amz_date + "' is not in the form YYYYMMDDTHHMMSSZ");
  }
  if (claim.amz_date.substr(0, 8) != claim.credential.date) {
    throw S3Error(claim.presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed",
                  "the credential's date " + claim.credential.date + " is not the request's " + claim.amz_date);
  }
  if (claim.presigned) {
    const std::string expires_text = request.query_value("X-Amz-Expires").value_or("");
    const bool negative = expires_text.starts_with('-');
    const std::string_view digits = std::string_view(expires_text).substr(negative ? 1 : 0);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
      throw S3Error("AuthorizationQueryParametersError", "X-Amz-Expires '" + expires_text.substr(0, 20) +
                                                             "' is not a number of seconds");
    }
    // A number outside 1..604800 is refused like an expired URL: 403 AccessDenied, what S3's
    // conformance tests expect for 0, -7 and 604801 (they check the status only).
    if (negative || digits.size() > 7 || std::stol(std::string(digits)) < 1 ||
        std::stol(std::string(digits)) > kMaxPresignSeconds) {
      throw S3Error("AccessDenied", "X-Amz-Expires must be 1 to 604800 seconds");
    }
    if (signed_at > now + kMaxClockSkewSeconds) throw S3Error("AccessDenied", "the presigned URL is not valid yet");
    if (now > signed_at + std::stol(std::string(digits))) throw S3Error("AccessDenied", "the presigned URL has expired");
    return;
  }
  if (signed_at > now + kMaxClockSkewSeconds || signed_at < now - kMaxClockSkewSeconds) {
    throw S3Error("RequestTimeTooSkewed", "the request was signed at " + claim.amz_date +
                                              ", more than 15 minutes from the server's clock");
  }
}

PayloadKind payload_kind(const std::string& hash) {
  if (sigv4::is_lower_hex_sha256(hash)) return PayloadKind::kSignedHash;
  if (hash == sigv4::kUnsignedPayload) return PayloadKind::kUnsigned;
  if (hash == sigv4::kStreamingSignedPayload) return PayloadKind::kStreamingSigned;
  if (hash == sigv4::kStreamingSignedPayloadTrailer) return PayloadKind::kStreamingSignedTrailer;
  if (hash == sigv4::kStreamingUnsignedPayloadTrailer) return PayloadKind::kStreamingUnsignedTrailer;
  throw S3Error("InvalidArgument", "x-amz-content-sha256 '" + hash.substr(0, 100) +
                                       "' is neither a lower-case hex SHA-256 nor a known payload mode");
}

}  // namespace

const User& anonymous_user() {
  static const User kAnonymous;
  return kAnonymous;
}

std::time_t parse_amz_date(std::string_view text) {
  if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z') return -1;
  const auto number = [&](size_t at, size_t length) {
    int value = 0;
    for (size_t i = at; i < at + length; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      value = value * 10 + (text[i] - '0');
    }
    return value;
  };
  std::tm tm{};
  tm.tm_year = number(0, 4) - 1900;
  tm.tm_mon = number(4, 2) - 1;
  tm.tm_mday = number(6, 2);
  tm.tm_hour = number(9, 2);
  tm.tm_min = number(11, 2);
  tm.tm_sec = number(13, 2);
  if (tm.tm_year < 0 || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 ||
      tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 || tm.tm_sec > 60) {
    return -1;
  }
  return timegm(&tm);
}

const User& user_of_access_key(const std::vector<User>& users, const std::string& access_key) {
  const auto user = std::find_if(users.begin(), users.end(), [&](const User& u) { return u.access_key == access_key; });
  if (user == users.end()) throw S3Error("InvalidAccessKeyId", "the access key '" + access_key + "' is not known here");
  return *user;
}

void check_post_form_signature(const std::string& expected, const std::string& provided,
                               const std::string& access_key, const std::string& policy) {
  if (constant_time_equal(expected, provided)) return;
  S3Error error("SignatureDoesNotMatch",
                "the signature of the POST policy we calculated does not match the signature you provided");
  error.details = {{"AWSAccessKeyId", access_key}, {"StringToSign", policy}, {"SignatureProvided", provided}};
  throw error;
}

const User& verify_post_form_v4(const std::string& credential, const std::string& policy, const std::string& signature,
                                const std::vector<User>& users) {
  const Credential parsed = parse_credential(credential, "InvalidArgument");
  const User& user = user_of_access_key(users, parsed.access_key);
  const auto key = sigv4::signing_key(user.secret_key, parsed.date, parsed.region, sigv4::kS3Service);
  check_post_form_signature(sigv4::signature(key, policy), signature, parsed.access_key, policy);
  return user;
}

Authentication authenticate(const S3Request& request, const std::vector<User>& users, std::time_t now) {
  if (signed_with_v2(request)) return authenticate_v2(request, users, now);
  const std::string authorization = request.header("authorization");
  Claim claim;
  if (!authorization.empty()) {
    claim = header_claim(request, authorization);
  } else if (request.has_query("X-Amz-Signature") || request.has_query("X-Amz-Credential")) {
    claim = query_claim(request);
  } else {
    Authentication anonymous;
    anonymous.user = &anonymous_user();
    const std::string hash = request.header("x-amz-content-sha256");
    if (!hash.empty()) {
      anonymous.payload = payload_kind(hash);
      if (anonymous.payload == PayloadKind::kSignedHash) anonymous.payload_sha256 = hash;
      if (anonymous.payload != PayloadKind::kSignedHash && anonymous.payload != PayloadKind::kUnsigned) {
        throw S3Error("InvalidRequest", "an anonymous request cannot carry an aws-chunked body");
      }
    }
    return anonymous;
  }

  const User* user = &user_of_access_key(users, claim.credential.access_key);
  check_time(request, claim, now);

  Authentication auth;
  auth.user = user;
  std::string payload_hash = request.header("x-amz-content-sha256");
  if (claim.presigned) {
    if (payload_hash.empty()) payload_hash = sigv4::kUnsignedPayload;
  } else if (payload_hash.empty()) {
    throw S3Error("InvalidRequest", "a signed request needs the x-amz-content-sha256 header");
  }
  auth.payload = payload_kind(payload_hash);
  if (auth.payload == PayloadKind::kSignedHash) auth.payload_sha256 = payload_hash;
  if (claim.presigned && auth.payload != PayloadKind::kSignedHash && auth.payload != PayloadKind::kUnsigned) {
    throw S3Error("InvalidRequest", "a presigned URL cannot carry an aws-chunked body");
  }

  sigv4::SigningRequest signing{request.method, request.host, request.path, {}, {}, payload_hash};
  for (const auto& parameter : request.query) {
    if (!(claim.presigned && parameter.first == "X-Amz-Signature")) signing.query.push_back(parameter);
  }
  for (const auto& name : claim.signed_headers) {
    if (name == "host") continue;
    if (!request.has_header(name)) {
      throw S3Error(claim.presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed",
                    "signed header '" + name + "' is not in the request");
    }
    for (const auto& header : request.headers) {
      if (header.first == name) signing.headers.push_back(header);
    }
  }
  std::string canonical;
  try {
    canonical = sigv4::canonical_request(signing, claim.signed_headers);
  } catch (const Error& e) {
    throw S3Error("SignatureDoesNotMatch", std::string("the request cannot be canonicalised: ") + e.what());
  }
  const std::string to_sign = sigv4::string_to_sign(claim.amz_date, claim.credential.scope, canonical);
  const auto key = sigv4::signing_key(user->secret_key, claim.credential.date, claim.credential.region,
                                      sigv4::kS3Service);
  const std::string expected = sigv4::signature(key, to_sign);
  if (!constant_time_equal(expected, claim.signature)) {
    S3Error error("SignatureDoesNotMatch",
                  "the request signature we calculated does not match the signature you provided; check your key "
                  "and signing method");
    error.details = {{"AWSAccessKeyId", claim.credential.access_key},
                     {"StringToSign", to_sign},
                     {"SignatureProvided", claim.signature},
                     {"CanonicalRequest", canonical}};
    throw error;
  }
  auth.signing = {key, claim.amz_date, claim.credential.scope, claim.signature};
  auth.signed_headers = std::move(claim.signed_headers);
  return auth;
}

}  // namespace keel::gateway
