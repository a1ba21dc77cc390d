// AWS Signature Version 4 for S3: signing requests with an Authorization
// header or a presigned URL. The canonicalisation steps (canonical request,
// string to sign, signing key, signature) are public so that a server can
// verify a request by recomputing its signature from the same code.
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/bytes.h"

namespace keel::targets::s3 {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless the credentials are temporary (STS)

  bool empty() const { return access_key_id.empty() && secret_access_key.empty() && session_token.empty(); }
};

using NameValues = std::vector<std::pair<std::string, std::string>>;

// One HTTP request as SigV4 sees it. Names and values are raw: this module
// does all the encoding, so the caller must build the request line from
// encode_path() and canonical_query_string() to send what was signed.
struct SigningRequest {
  std::string method;        // "PUT"
  std::string host;          // Host header value, with the port when it is not the scheme's default
  std::string path;          // unencoded: "/bucket/packs/ab/ab12" (path-style) or "/packs/ab/ab12"
  NameValues query;          // unencoded names and values; a bare "?uploads" is {"uploads", ""}
  NameValues headers;        // headers to sign besides host (and, when signing, x-amz-date and co.)
  std::string payload_hash;  // lowercase hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kSigV4Algorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view kS3Service = "s3";
// Payload hashes of aws-chunked bodies: chunk signatures, optional trailers.
inline constexpr std::string_view kStreamingSignedPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
inline constexpr std::string_view kStreamingSignedPayloadTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
inline constexpr std::string_view kStreamingUnsignedPayloadTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

// Signs `request` at time `now` for service "s3". Returns the headers to add
// to the HTTP request: authorization, x-amz-content-sha256, x-amz-date, and
// x-amz-security-token when the credentials carry a session token. The signed
// headers are host, request.headers and those added here, so request.headers
// must not hold host, authorization or the x-amz-* headers added here.
// Throws Error(kUsage) on missing credentials, a bad payload hash or header.
NameValues sign_request(const SigningRequest& request, const Credentials& credentials, const std::string& region,
                        std::time_t now);

// Query-string signing (a presigned URL) valid for `expires_seconds` (1 to
// 604800, S3's limit) from `now`. Signs host and request.headers, with the
// payload as UNSIGNED-PAYLOAD (request.payload_hash is not used). Returns
// encoded path + "?" + query with the X-Amz-* parameters; no scheme or host.
std::string presign(const SigningRequest& request, const Credentials& credentials, const std::string& region,
                    std::time_t now, int expires_seconds);

// S3's rules for the canonical URI: each segment URI-encoded, '/' kept, and no
// normalisation ("//" and "." segments stay). A '%' in the raw path is data
// and becomes "%25". An empty path is "/"; any other must start with '/'.
std::string encode_path(std::string_view raw_path);

// Names and values URI-encoded ('/' too), sorted by name then value, joined
// as name=value with '&'. A parameter without a value signs as "name=".
std::string canonical_query_string(const NameValues& query);

// Percent-encodes every byte except the RFC 3986 unreserved characters
// A-Z a-z 0-9 - _ . ~ (and '/' when !encode_slash), with upper-case hex.
std::string uri_encode(std::string_view s, bool encode_slash);

std::string sha256_hex(ByteView data);

// The canonical request over the headers in `signed_header_names`, which
// must be lower case, sorted and unique, each present in request.headers or
// "host" (request.host). Header names match case-insensitively; values are
// trimmed with inner whitespace runs collapsed to one space, and repeated
// headers are joined with ',' in order. The payload hash is used as given.
// A verifier of a presigned URL passes the query without X-Amz-Signature.
std::string canonical_request(const SigningRequest& request, const std::vector<std::string>& signed_header_names);

// "<date>/<region>/<service>/aws4_request".
std::string credential_scope(std::string_view date, std::string_view region, std::string_view service = kS3Service);

// True for 64 lower-case hex digits (a SHA-256 in the form SigV4 uses).
bool is_lower_hex_sha256(std::string_view s);

// "AWS4-HMAC-SHA256\n<amz_date>\n<scope>\n<hex SHA-256 of canonical_request>".
std::string string_to_sign(std::string_view amz_date, std::string_view scope, std::string_view canonical_request);

// HMAC-SHA-256 chain from "AWS4" + secret over date (YYYYMMDD), region,
// service and "aws4_request".
std::array<uint8_t, 32> signing_key(std::string_view secret, std::string_view date, std::string_view region,
                                    std::string_view service);

// Lowercase hex HMAC-SHA-256 of the string to sign under the signing key.
std::string signature(const std::array<uint8_t, 32>& key, std::string_view string_to_sign);

// aws-chunked bodies sign each chunk, chaining signatures from the request's
// own (the seed): "AWS4-HMAC-SHA256-PAYLOAD\n<amz_date>\n<scope>\n<previous
// signature>\n<hex SHA-256 of "">\n<hex SHA-256 of the chunk data>".
std::string chunk_string_to_sign(std::string_view amz_date, std::string_view scope,
                                 std::string_view previous_signature, std::string_view chunk_sha256_hex);
// The trailer's: "AWS4-HMAC-SHA256-TRAILER\n<amz_date>\n<scope>\n<previous
// signature>\n<hex SHA-256 of the trailer lines, each "name:value\n">".
std::string trailer_string_to_sign(std::string_view amz_date, std::string_view scope,
                                   std::string_view previous_signature, std::string_view trailer_sha256_hex);

}  // namespace keel::targets::s3
