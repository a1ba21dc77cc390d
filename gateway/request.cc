#include "gateway/request.h"

#include <algorithm>
#include <array>
#include <optional>

#include "gateway/s3_error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string host_without_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') return std::string(host.substr(0, host.find(']') + 1));
  return std::string(host.substr(0, host.rfind(':')));
}

// Subresources of S3 that the gateway does not serve: asking for one must not
// fall through to a plain object or bucket operation.
constexpr std::array<std::string_view, 16> kUnsupportedSubresources = {
    "accelerate", "analytics", "intelligent-tiering", "inventory",
    "logging", "metrics", "notification",
    "replication", "requestPayment", "restore", "select",
    "tagging", "torrent", "website", "session", "renameObject",
};

void refuse_unsupported_subresources(const S3Request& request) {
  for (const auto& [name, value] : request.query) {
    if (std::find(kUnsupportedSubresources.begin(), kUnsupportedSubresources.end(), name) !=
        kUnsupportedSubresources.end()) {
      throw S3Error("NotImplemented", "the gateway does not implement the '" + name + "' subresource (" +
                                          request.method + ")");
    }
  }
}

[[noreturn]] void method_not_allowed(const S3Request& request) {
  throw S3Error("MethodNotAllowed", request.method + " is not allowed on " + request.resource());
}

// ?acl, ?policy, ?policyStatus, ?ownershipControls, ?publicAccessBlock, ?cors, ?encryption and ?lifecycle
// on a bucket.
std::optional<Operation> route_bucket_access(const S3Request& r) {
  struct Subresource {
    std::string_view name;
    Operation get, put;
    std::optional<Operation> remove;  // DELETE (an ACL cannot be deleted)
  };
  static constexpr std::array<Subresource, 7> kSubresources = {{
      {"acl", Operation::kGetBucketAcl, Operation::kPutBucketAcl, std::nullopt},
      {"policy", Operation::kGetBucketPolicy, Operation::kPutBucketPolicy, Operation::kDeleteBucketPolicy},
      {"ownershipControls", Operation::kGetBucketOwnershipControls, Operation::kPutBucketOwnershipControls,
       Operation::kDeleteBucketOwnershipControls},
      {"publicAccessBlock", Operation::kGetPublicAccessBlock, Operation::kPutPublicAccessBlock,
       Operation::kDeletePublicAccessBlock},
      {"cors", Operation::kGetBucketCors, Operation::kPutBucketCors, Operation::kDeleteBucketCors},
      {"encryption", Operation::kGetBucketEncryption, Operation::kPutBucketEncryption,
       Operation::kDeleteBucketEncryption},
      {"lifecycle", Operation::kGetBucketLifecycle, Operation::kPutBucketLifecycle, Operation::kDeleteBucketLifecycle},
  }};
  // GetBucketPolicyStatus is answered by the GetBucketPolicy handler (a view of the policy).
  if (r.has_query("policyStatus")) {
    if (r.method != "GET") method_not_allowed(r);
    return Operation::kGetBucketPolicy;
  }
  for (const auto& s : kSubresources) {
    if (!r.has_query(s.name)) continue;
    if (r.method == "GET") return s.get;
    if (r.method == "PUT") return s.put;
    if (r.method == "DELETE" && s.remove) return *s.remove;
    method_not_allowed(r);
  }
  return std::nullopt;
}

}  // namespace

std::string S3Request::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return {};
}

bool S3Request::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return h.first == name; });
}

bool S3Request::has_query(std::string_view name) const {
  return std::any_of(query.begin(), query.end(), [&](const auto& q) { return q.first == name; });
}

std::optional<std::string> S3Request::query_value(std::string_view name) const {
  for (const auto& [n, v] : query) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::string S3Request::resource() const {
  if (bucket.empty()) return "/";
  return "/" + bucket + (key.empty() ? "" : "/" + key);
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const bool complete = i + 2 < text.size();
    const int hi = complete ? hex_digit(text[i + 1]) : -1;
    const int lo = complete ? hex_digit(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) throw S3Error("InvalidURI", "malformed percent escape in '" + std::string(text) + "'");
    out += static_cast<char>(hi << 4 | lo);
    i += 2;
  }
  return out;
}

bool is_valid_bucket_name(std::string_view name) {
  if (name.size() < 3 || name.size() > 63) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  if (!std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '.' || c == '-'; })) return false;
  // Each dot-separated label starts and ends with a letter or digit (DNS), so no "..", ".-" or "-.".
  for (const std::string_view bad : {"..", ".-", "-."}) {
    if (name.find(bad) != std::string_view::npos) return false;
  }
  // Not an IPv4 address: four dot-separated runs of digits.
  const bool digits_and_dots = name.find_first_not_of("0123456789.") == std::string_view::npos;
  return !(digits_and_dots && std::count(name.begin(), name.end(), '.') == 3);
}

S3Request parse_request(std::string method, std::string_view target, NameValues headers,
                        const std::vector<std::string>& domains) {
  S3Request r;
  r.method = std::move(method);
  r.target = std::string(target);
  r.headers = std::move(headers);
  r.host = r.header("host");
  if (target.empty() || target.front() != '/') {
    throw S3Error("InvalidURI", "request target '" + std::string(target.substr(0, 200)) + "' is not an absolute path");
  }
  const size_t question = target.find('?');
  r.path = percent_decode(target.substr(0, question));
  if (question != std::string_view::npos) {
    std::string_view rest = target.substr(question + 1);
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      if (!pair.empty()) {
        const size_t eq = pair.find('=');
        r.query.emplace_back(percent_decode(pair.substr(0, eq)),
                             eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1)));
      }
      if (amp == std::string_view::npos) break;
      rest = rest.substr(amp + 1);
    }
  }

  const std::string host = ascii_lower(host_without_port(r.host));
  for (const auto& domain : domains) {
    if (host.size() > domain.size() + 1 && host.ends_with("." + ascii_lower(domain))) {
      r.bucket = host.substr(0, host.size() - domain.size() - 1);
      r.virtual_hosted = true;
      r.key = r.path.substr(1);
      break;
    }
  }
  if (!r.virtual_hosted) {
    const size_t slash = r.path.find('/', 1);
    r.bucket = r.path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    r.key = slash == std::string::npos ? "" : r.path.substr(slash + 1);
  }
  if (!r.bucket.empty() && !is_valid_bucket_name(r.bucket)) {
    throw S3Error("InvalidBucketName", "'" + r.bucket + "' is not a valid bucket name");
  }
  if (r.key.size() > 1024) throw S3Error("KeyTooLongError", "object keys are at most 1024 bytes");
  return r;
}

Operation route(const S3Request& r) {
  const std::string& m = r.method;
  if (r.bucket.empty()) {
    if (m == "GET") return Operation::kListBuckets;
    method_not_allowed(r);
  }
  if (r.key.empty()) {
    if (const auto access = route_bucket_access(r)) return *access;
    if (r.has_query("tagging")) {
      if (m == "GET") return Operation::kGetBucketTagging;
      if (m == "PUT") return Operation::kPutBucketTagging;
      if (m == "DELETE") return Operation::kDeleteBucketTagging;
    }
    if (m == "GET") {
      if (r.has_query("location")) return Operation::kGetBucketLocation;
      if (r.has_query("uploads")) return Operation::kListMultipartUploads;
      if (r.has_query("versioning")) return Operation::kGetBucketVersioning;
      if (r.has_query("versions")) return Operation::kListObjectVersions;
      if (r.has_query("object-lock")) return Operation::kGetObjectLockConfiguration;
      refuse_unsupported_subresources(r);
      return r.query_value("list-type") == "2" ? Operation::kListObjectsV2 : Operation::kListObjects;
    }
    if (m == "POST" && r.has_query("delete")) return Operation::kDeleteObjects;
    if (m == "PUT" && r.has_query("versioning")) return Operation::kPutBucketVersioning;
    if (m == "PUT" && r.has_query("object-lock")) return Operation::kPutObjectLockConfiguration;
    refuse_unsupported_subresources(r);
    if (m == "POST" && r.query.empty()) return Operation::kPostObject;  // a browser's form: no query
    if (m == "HEAD") return Operation::kHeadBucket;
    if (m == "PUT") return Operation::kCreateBucket;
    if (m == "DELETE") return Operation::kDeleteBucket;
    method_not_allowed(r);
  }
  const bool copy = r.has_header("x-amz-copy-source");
  if (r.has_query("acl") && (m == "GET" || m == "PUT")) {
    return m == "GET" ? Operation::kGetObjectAcl : Operation::kPutObjectAcl;
  }
  if (r.has_query("retention") && (m == "GET" || m == "PUT")) {
    return m == "GET" ? Operation::kGetObjectRetention : Operation::kPutObjectRetention;
  }
  if (r.has_query("tagging")) {
    if (m == "GET") return Operation::kGetObjectTagging;
    if (m == "PUT") return Operation::kPutObjectTagging;
    if (m == "DELETE") return Operation::kDeleteObjectTagging;
  }
  if (r.has_query("legal-hold") && (m == "GET" || m == "PUT")) {
    return m == "GET" ? Operation::kGetObjectLegalHold : Operation::kPutObjectLegalHold;
  }
  if (m == "GET" && r.has_query("uploadId")) return Operation::kListParts;
  if (m == "GET" && r.has_query("attributes")) return Operation::kGetObjectAttributes;
  if (m == "GET" && r.has_query("torrent")) return Operation::kGetObjectTorrent;
  if (m == "PUT" && r.has_query("uploadId") && r.has_query("partNumber")) {
    return copy ? Operation::kUploadPartCopy : Operation::kUploadPart;
  }
  if (m == "POST" && r.has_query("uploads")) return Operation::kCreateMultipartUpload;
  if (m == "POST" && r.has_query("uploadId")) return Operation::kCompleteMultipartUpload;
  if (m == "DELETE" && r.has_query("uploadId")) return Operation::kAbortMultipartUpload;
  refuse_unsupported_subresources(r);
  if (m == "GET") return Operation::kGetObject;
  if (m == "HEAD") return Operation::kHeadObject;
  if (m == "PUT") return copy ? Operation::kCopyObject : Operation::kPutObject;
  if (m == "DELETE") return Operation::kDeleteObject;
  method_not_allowed(r);
}

bool takes_body(Operation operation) {
  switch (operation) {
    case Operation::kCreateBucket:
    case Operation::kDeleteObjects:
    case Operation::kPutObject:
    case Operation::kPostObject:
    case Operation::kUploadPart:
    case Operation::kCompleteMultipartUpload:
    case Operation::kPutBucketVersioning:
    case Operation::kPutObjectLockConfiguration:
    case Operation::kPutObjectRetention:
    case Operation::kPutObjectLegalHold:
    case Operation::kPutObjectTagging:
    case Operation::kPutBucketTagging:
    case Operation::kPutBucketAcl:
    case Operation::kPutObjectAcl:
    case Operation::kPutBucketPolicy:
    case Operation::kPutBucketOwnershipControls:
    case Operation::kPutPublicAccessBlock:
    case Operation::kPutBucketCors:
    case Operation::kPutBucketEncryption:
    case Operation::kPutBucketLifecycle:
      return true;
    default:
      return false;
  }
}

std::string_view operation_name(Operation operation) {
  static constexpr std::array<std::string_view, 60> kNames = {
      "ListBuckets", "CreateBucket", "DeleteBucket", "HeadBucket", "GetBucketLocation", "ListObjects",
      "ListObjectsV2", "DeleteObjects", "ListMultipartUploads", "PutObject", "CopyObject", "GetObject",
      "HeadObject", "DeleteObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy",
      "CompleteMultipartUpload", "AbortMultipartUpload", "ListParts", "GetBucketVersioning", "PutBucketVersioning",
      "ListObjectVersions", "GetObjectLockConfiguration", "PutObjectLockConfiguration", "GetObjectRetention",
      "PutObjectRetention", "GetObjectLegalHold", "PutObjectLegalHold", "GetObjectTagging", "PutObjectTagging",
      "DeleteObjectTagging", "GetObjectAttributes", "GetBucketTagging", "PutBucketTagging", "DeleteBucketTagging",
      "GetBucketAcl", "PutBucketAcl", "GetObjectAcl", "PutObjectAcl", "GetBucketPolicy",
      "PutBucketPolicy", "DeleteBucketPolicy", "GetBucketOwnershipControls", "PutBucketOwnershipControls",
      "DeleteBucketOwnershipControls", "GetPublicAccessBlock", "PutPublicAccessBlock", "DeletePublicAccessBlock",
      "GetBucketCors", "PutBucketCors", "DeleteBucketCors", "GetBucketEncryption", "PutBucketEncryption",
      "DeleteBucketEncryption", "GetBucketLifecycleConfiguration", "PutBucketLifecycleConfiguration",
      "DeleteBucketLifecycle", "PostObject", "GetObjectTorrent"};
  return kNames[static_cast<size_t>(operation)];
}

}  // namespace keel::gateway
