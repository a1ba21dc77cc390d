#include "targets/s3/sigv4.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <initializer_list>
#include <memory>

#include "util/digest.h"
#include "util/error.h"
#include "util/text.h"
#include "util/openssl.h"

namespace keel::targets::s3 {

namespace {

constexpr std::string_view kAlgorithm = kSigV4Algorithm;
constexpr std::string_view kService = kS3Service;
constexpr std::string_view kScopeTerminator = "aws4_request";
constexpr int kMaxPresignSeconds = 7 * 24 * 3600;  // S3 rejects longer X-Amz-Expires

EVP_MAC* hmac_mac() {
  static const MacPtr mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) throw_openssl("fetching HMAC");
  return mac.get();
}

std::array<uint8_t, 32> hmac_sha256(ByteView key, std::string_view message) {
  const MacCtxPtr ctx(EVP_MAC_CTX_new(hmac_mac()));
  if (!ctx) throw_openssl("creating an HMAC context");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx.get(), key.data(), key.size(), params) != 1) throw_openssl("HMAC-SHA-256 init");
  const ByteView bytes = as_bytes(message);
  if (EVP_MAC_update(ctx.get(), bytes.data(), bytes.size()) != 1) throw_openssl("HMAC-SHA-256 update");
  std::array<uint8_t, 32> out;
  size_t written = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &written, out.size()) != 1 || written != out.size()) {
    throw_openssl("HMAC-SHA-256 final");
  }
  return out;
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// An HTTP field name (RFC 9110 token): visible ASCII without separators.
bool is_valid_header_name(std::string_view name) {
  constexpr std::string_view kSeparators = "\"(),/:;<=>?@[\\]{}";
  return !name.empty() && std::all_of(name.begin(), name.end(), [&](char c) {
    return c > ' ' && c < 0x7f && kSeparators.find(c) == std::string_view::npos;
  });
}

// SigV4's Trimall: no leading or trailing blanks, inner runs of blanks become
// one space. Line breaks or other control bytes could smuggle a header into
// the request, so they are refused rather than folded.
std::string canonical_header_value(std::string_view name, std::string_view value) {
  std::string out;
  out.reserve(value.size());
  bool pending_space = false;
  for (char c : value) {
    if (is_blank(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) {
      throw Error(ErrorKind::kUsage, "SigV4: header " + std::string(name) + " has a control character in its value");
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

// The request's headers with lower-case names and canonical values, in
// their original order. "host" must come from SigningRequest::host only.
NameValues canonical_headers(const NameValues& headers) {
  NameValues out;
  out.reserve(headers.size());
  for (const auto& [name, value] : headers) {
    if (!is_valid_header_name(name)) {
      throw Error(ErrorKind::kUsage, "SigV4: invalid HTTP header name '" + name + "'");
    }
    std::string lower_name = ascii_lower(name);
    if (lower_name == "host") {
      throw Error(ErrorKind::kUsage, "SigV4: pass the Host header as SigningRequest::host, not among the headers");
    }
    out.emplace_back(std::move(lower_name), canonical_header_value(name, value));
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, char separator) {
  std::string out;
  for (const auto& part : parts) {
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

// "host" plus the lower-cased names of `headers`, sorted and unique.
std::vector<std::string> signed_header_names_of(const NameValues& headers) {
  std::vector<std::string> names{"host"};
  for (const auto& header : headers) names.push_back(ascii_lower(header.first));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

void check_scope_inputs(const Credentials& credentials, const std::string& region) {
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty()) {
    throw Error(ErrorKind::kUsage, "SigV4: signing needs both an access key id and a secret access key");
  }
  // The credential scope is '/'-separated and the Authorization header is
  // split on ',' and spaces, so these would make the signature unparseable.
  const auto breaks_scope = [](const std::string& s) {
    return s.find_first_of("/, \t") != std::string::npos;
  };
  if (breaks_scope(credentials.access_key_id)) {
    throw Error(ErrorKind::kUsage, "SigV4: access key id '" + credentials.access_key_id +
                                       "' contains '/', ',' or whitespace");
  }
  if (region.empty() || breaks_scope(region)) {
    throw Error(ErrorKind::kUsage, "SigV4: invalid region '" + region + "'");
  }
}

// Rejects caller headers that the signer sets itself.
void check_no_reserved_headers(const NameValues& headers, std::initializer_list<std::string_view> reserved) {
  for (const auto& header : headers) {
    const std::string name = ascii_lower(header.first);
    if (std::find(reserved.begin(), reserved.end(), name) != reserved.end()) {
      throw Error(ErrorKind::kUsage, "SigV4: header " + name + " is set by the signer; remove it from the request");
    }
  }
}

struct SigningTime {
  std::string amz_date;  // 20130524T000000Z
  std::string date;      // 20130524
};

SigningTime signing_time(std::time_t now) {
  std::tm utc{};
  if (gmtime_r(&now, &utc) == nullptr) {
    throw Error(ErrorKind::kUsage, "SigV4: time " + std::to_string(now) + " is out of range");
  }
  char text[32];
  if (std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc) != 16) {
    throw Error(ErrorKind::kUsage, "SigV4: time " + std::to_string(now) + " does not fit the ISO 8601 basic format");
  }
  return {text, std::string(text, 8)};
}

std::string sign_canonical(const SigningRequest& request, const std::vector<std::string>& signed_names,
                           const Credentials& credentials, const std::string& region, const SigningTime& time) {
  const std::string canonical = canonical_request(request, signed_names);
  const std::string to_sign = string_to_sign(time.amz_date, credential_scope(time.date, region), canonical);
  return signature(signing_key(credentials.secret_access_key, time.date, region, kService), to_sign);
}

}  // namespace

std::string uri_encode(std::string_view s, bool encode_slash) {
  return percent_encode(s, encode_slash ? "-_.~" : "-_.~/");
}

std::string encode_path(std::string_view raw_path) {
  if (raw_path.empty()) return "/";
  if (raw_path.front() != '/') {
    throw Error(ErrorKind::kUsage, "SigV4: request path '" + std::string(raw_path) + "' does not start with '/'");
  }
  return uri_encode(raw_path, false);
}

std::string canonical_query_string(const NameValues& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    if (name.empty()) throw Error(ErrorKind::kUsage, "SigV4: query parameter with an empty name");
    encoded.emplace_back(uri_encode(name, true), uri_encode(value, true));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

std::string sha256_hex(ByteView data) { return to_hex(sha256(data)); }

std::string canonical_request(const SigningRequest& request, const std::vector<std::string>& signed_header_names) {
  if (request.method.empty()) throw Error(ErrorKind::kUsage, "SigV4: request without a method");
  if (signed_header_names.empty()) throw Error(ErrorKind::kUsage, "SigV4: no headers to sign (host at least)");
  const NameValues headers = canonical_headers(request.headers);

  std::string header_block;
  for (size_t i = 0; i < signed_header_names.size(); ++i) {
    const std::string& name = signed_header_names[i];
    if (name != ascii_lower(name) || (i > 0 && !(signed_header_names[i - 1] < name))) {
      throw Error(ErrorKind::kUsage, "SigV4: signed header names must be lower case, sorted and unique; got '" +
                                         join(signed_header_names, ';') + "'");
    }
    std::vector<std::string> values;
    if (name == "host") {
      if (request.host.empty()) throw Error(ErrorKind::kUsage, "SigV4: request without a host");
      values.push_back(canonical_header_value(name, request.host));
    }
    for (const auto& [header_name, value] : headers) {
      if (header_name == name) values.push_back(value);
    }
    if (values.empty()) {
      throw Error(ErrorKind::kUsage, "SigV4: signed header " + name + " is not in the request");
    }
    header_block += name + ":" + join(values, ',') + "\n";
  }

  return request.method + "\n" + encode_path(request.path) + "\n" + canonical_query_string(request.query) + "\n" +
         header_block + "\n" + join(signed_header_names, ';') + "\n" + request.payload_hash;
}

std::string credential_scope(std::string_view date, std::string_view region, std::string_view service) {
  std::string out(date);
  out += '/';
  out += region;
  out += '/';
  out += service;
  out += '/';
  out += kScopeTerminator;
  return out;
}

bool is_lower_hex_sha256(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string string_to_sign(std::string_view amz_date, std::string_view scope, std::string_view canonical_request) {
  std::string out(kAlgorithm);
  out += '\n';
  out += amz_date;
  out += '\n';
  out += scope;
  out += '\n';
  out += sha256_hex(as_bytes(canonical_request));
  return out;
}

std::array<uint8_t, 32> signing_key(std::string_view secret, std::string_view date, std::string_view region,
                                    std::string_view service) {
  const std::string seed = "AWS4" + std::string(secret);
  auto key = hmac_sha256(as_bytes(seed), date);
  key = hmac_sha256(key, region);
  key = hmac_sha256(key, service);
  return hmac_sha256(key, kScopeTerminator);
}

std::string signature(const std::array<uint8_t, 32>& key, std::string_view string_to_sign) {
  return to_hex(hmac_sha256(key, string_to_sign));
}

std::string chunk_string_to_sign(std::string_view amz_date, std::string_view scope,
                                 std::string_view previous_signature, std::string_view chunk_sha256_hex) {
  static const std::string kEmptySha256 = sha256_hex({});
  return std::string(kAlgorithm) + "-PAYLOAD\n" + std::string(amz_date) + "\n" + std::string(scope) + "\n" +
         std::string(previous_signature) + "\n" + kEmptySha256 + "\n" + std::string(chunk_sha256_hex);
}

std::string trailer_string_to_sign(std::string_view amz_date, std::string_view scope,
                                   std::string_view previous_signature, std::string_view trailer_sha256_hex) {
  return std::string(kAlgorithm) + "-TRAILER\n" + std::string(amz_date) + "\n" + std::string(scope) + "\n" +
         std::string(previous_signature) + "\n" + std::string(trailer_sha256_hex);
}

NameValues sign_request(const SigningRequest& request, const Credentials& credentials, const std::string& region,
                        std::time_t now) {
  check_scope_inputs(credentials, region);
  if (request.payload_hash != kUnsignedPayload && !is_lower_hex_sha256(request.payload_hash)) {
    throw Error(ErrorKind::kUsage, "SigV4: payload hash '" + request.payload_hash +
                                       "' is neither 64 lowercase hex digits nor UNSIGNED-PAYLOAD");
  }
  check_no_reserved_headers(request.headers,
                            {"authorization", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"});
  const SigningTime time = signing_time(now);

  NameValues added{{"x-amz-content-sha256", request.payload_hash}, {"x-amz-date", time.amz_date}};
  if (!credentials.session_token.empty()) added.emplace_back("x-amz-security-token", credentials.session_token);

  SigningRequest signed_request = request;
  signed_request.headers.insert(signed_request.headers.end(), added.begin(), added.end());
  const std::vector<std::string> names = signed_header_names_of(signed_request.headers);
  const std::string sig = sign_canonical(signed_request, names, credentials, region, time);

  NameValues out{{"authorization", std::string(kAlgorithm) + " Credential=" + credentials.access_key_id + "/" +
                                       credential_scope(time.date, region) +
                                       ", SignedHeaders=" + join(names, ';') + ", Signature=" + sig}};
  out.insert(out.end(), added.begin(), added.end());
  return out;
}

std::string presign(const SigningRequest& request, const Credentials& credentials, const std::string& region,
                    std::time_t now, int expires_seconds) {
  check_scope_inputs(credentials, region);
  if (expires_seconds < 1 || expires_seconds > kMaxPresignSeconds) {
    throw Error(ErrorKind::kUsage, "SigV4: presigned URL lifetime " + std::to_string(expires_seconds) +
                                       " s is outside 1 to " + std::to_string(kMaxPresignSeconds) + " s");
  }
  check_no_reserved_headers(request.headers, {"authorization"});
  const SigningTime time = signing_time(now);

  NameValues added{{"X-Amz-Algorithm", std::string(kAlgorithm)},
                   {"X-Amz-Credential", credentials.access_key_id + "/" + credential_scope(time.date, region)},
                   {"X-Amz-Date", time.amz_date},
                   {"X-Amz-Expires", std::to_string(expires_seconds)}};
  if (!credentials.session_token.empty()) added.emplace_back("X-Amz-Security-Token", credentials.session_token);
  const std::vector<std::string> names = signed_header_names_of(request.headers);
  added.emplace_back("X-Amz-SignedHeaders", join(names, ';'));
  for (const auto& parameter : request.query) {
    const std::string name = ascii_lower(parameter.first);
    const bool ours = name == "x-amz-signature" || std::any_of(added.begin(), added.end(), [&](const auto& added_one) {
                        return name == ascii_lower(added_one.first);
                      });
    if (ours) throw Error(ErrorKind::kUsage, "SigV4: query parameter " + parameter.first + " is set by the presigner");
  }

  SigningRequest signed_request = request;
  signed_request.query.insert(signed_request.query.end(), added.begin(), added.end());
  signed_request.payload_hash = kUnsignedPayload;
  const std::string sig = sign_canonical(signed_request, names, credentials, region, time);
  return encode_path(request.path) + "?" + canonical_query_string(signed_request.query) + "&X-Amz-Signature=" + sig;
}

}  // namespace keel::targets::s3
