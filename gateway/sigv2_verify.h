// Verifies AWS Signature Version 2 (HMAC-SHA1), in the Authorization header
// ("AWS ACCESSKEY:SIGNATURE") or as a query-string URL (AWSAccessKeyId,
// Expires, Signature), for older products and appliances. Only users whose
// configuration says `signature_v2 = true` may sign this way; others get the
// error AWS sends where V2 is not supported (InvalidRequest).
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "gateway/config.h"
#include "gateway/request.h"
#include "gateway/sigv4_verify.h"

namespace keel::gateway {

// Whether the request claims a Version 2 signature.
bool signed_with_v2(const S3Request& request);

// The payload of a V2 request is not signed (Content-MD5 and checksums still
// hold). Throws S3Error: InvalidAccessKeyId, InvalidRequest (V2 not enabled
// for that user), SignatureDoesNotMatch, RequestTimeTooSkewed, AccessDenied
// (expired URL, no date), InvalidArgument (aws-chunked body).
Authentication authenticate_v2(const S3Request& request, const std::vector<User>& users, std::time_t now);

// The string a V2 signature covers; `date` is the Date header's value, or the
// Expires parameter of a query-string URL ("" when x-amz-date stands in).
// `bucket_slash`: a request on a bucket names it "/bucket/" (as botocore signs
// path-style requests) rather than "/bucket".
std::string sigv2_string_to_sign(const S3Request& request, const std::string& date, bool bucket_slash = false);

// A browser POST form signed with Version 2: `signature` must be the base64
// HMAC-SHA1 of the form's base64 `policy` under the secret of `access_key`,
// a user with signature_v2 (the same InvalidRequest as authenticate_v2 when
// not). Throws S3Error InvalidAccessKeyId, InvalidRequest, SignatureDoesNotMatch.
const User& verify_post_form_v2(const std::string& access_key, const std::string& policy, const std::string& signature,
                                const std::vector<User>& users);

// Base64 HMAC-SHA1 of `to_sign` under `secret`.
std::string sigv2_signature(const std::string& secret, const std::string& to_sign);

}  // namespace keel::gateway
