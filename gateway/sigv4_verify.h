// Verifies AWS Signature Version 4 on incoming requests: the Authorization
// header or a presigned URL (X-Amz-* query parameters), recomputed with the
// same canonicalisation the client-side signer uses (targets/s3/sigv4.h).
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "gateway/config.h"
#include "gateway/request.h"

namespace keel::gateway {

// How the body is protected, from x-amz-content-sha256.
enum class PayloadKind {
  kSignedHash,                // a hex SHA-256 the body must match
  kUnsigned,                  // UNSIGNED-PAYLOAD (and every presigned URL)
  kStreamingSigned,           // aws-chunked, each chunk signed
  kStreamingSignedTrailer,    // aws-chunked, each chunk and the trailer signed
  kStreamingUnsignedTrailer,  // aws-chunked, unsigned, checksum in a trailer
};

// What chunk signatures chain from: the request's signing key, date, scope
// and its own signature (the seed).
struct ChunkSigning {
  std::array<uint8_t, 32> key{};
  std::string amz_date;
  std::string scope;
  std::string seed_signature;
};

struct Authentication {
  const User* user = nullptr;
  PayloadKind payload = PayloadKind::kUnsigned;
  std::string payload_sha256;  // kSignedHash only
  ChunkSigning signing;
  std::vector<std::string> signed_headers;  // lower case, as the signature lists them
};

// Who an unsigned request acts as: a user without name or keys, whom only
// ACLs and bucket policies can grant anything.
const User& anonymous_user();

// Requests are refused when their date is further than this from the clock
// (and presigned URLs once X-Amz-Expires has passed).
inline constexpr std::time_t kMaxClockSkewSeconds = 15 * 60;

// An unsigned request is anonymous_user()'s (UNSIGNED-PAYLOAD, or a hex
// x-amz-content-sha256 that the body must match). Version 2 signatures go to
// sigv2_verify.h. Throws S3Error: AccessDenied (unsupported credentials, expired URL),
// InvalidAccessKeyId, SignatureDoesNotMatch, RequestTimeTooSkewed,
// AuthorizationHeaderMalformed, AuthorizationQueryParametersError,
// InvalidArgument (bad x-amz-content-sha256).
Authentication authenticate(const S3Request& request, const std::vector<User>& users, std::time_t now);

// The user whose access key this is. Throws S3Error InvalidAccessKeyId.
const User& user_of_access_key(const std::vector<User>& users, const std::string& access_key);

// Throws SignatureDoesNotMatch unless `provided` is the `expected` signature
// of a browser POST form's base64 `policy` (either version's).
void check_post_form_signature(const std::string& expected, const std::string& provided,
                               const std::string& access_key, const std::string& policy);

// A browser POST form signed with Version 4: `signature` must be the hex
// HMAC-SHA256 of the form's base64 `policy` under the signing key of
// `credential` (x-amz-credential: ACCESSKEY/YYYYMMDD/REGION/s3/aws4_request).
// Throws S3Error InvalidArgument (a malformed credential), InvalidAccessKeyId,
// SignatureDoesNotMatch.
const User& verify_post_form_v4(const std::string& credential, const std::string& policy, const std::string& signature,
                                const std::vector<User>& users);

// "20130524T000000Z" to seconds since the epoch; -1 if malformed.
std::time_t parse_amz_date(std::string_view text);

}  // namespace keel::gateway
