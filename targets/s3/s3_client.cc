#include "targets/s3/s3_client.h"

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <chrono>
#include <cstring>
#include <sstream>

#include "targets/rdma/s3_headers.h"
#include "util/crc.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/xml.h"

namespace keel::targets::s3 {
namespace {

namespace pt = boost::property_tree;

std::string unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') return s.substr(1, s.size() - 2);
  return s;
}

// The element at `path`, or an empty tree if there is none.
pt::ptree child(const pt::ptree& tree, const std::string& path) {
  auto found = tree.get_child_optional(path);
  return found ? *found : pt::ptree();
}

pt::ptree parse_xml(ByteView body, const std::string& what) {
  std::istringstream in(std::string(as_chars(body)));
  pt::ptree tree;
  try {
    pt::read_xml(in, tree, pt::xml_parser::trim_whitespace);
  } catch (const pt::xml_parser_error& e) {
    throw Error(ErrorKind::kTargetIo, what + ": malformed XML from the server: " + e.message());
  }
  return tree;
}

bool retryable(int status, const std::string& code) {
  return status == 500 || status == 502 || status == 503 || status == 504 || status == 429 || status == 408 ||
         code == "RequestTimeout" || code == "SlowDown" || code == "InternalError";
}

void add_lock_headers(Headers& headers, const std::optional<Retention>& retention) {
  if (!retention) return;
  headers.emplace_back("x-amz-object-lock-mode", lock_mode_name(retention->mode));
  headers.emplace_back("x-amz-object-lock-retain-until-date", iso8601_utc(retention->until_unix));
}

// Thrown by an attempt's token grant when no RDMA session can be had: the
// request goes over HTTP instead.
struct NoRdmaSession {};

}  // namespace

void PayloadStats::add(uint64_t payload_bytes, std::chrono::steady_clock::duration took) {
  ++requests;
  bytes += payload_bytes;
  microseconds += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
}

std::string s3_error_code(ByteView body) {
  if (body.empty()) return "";
  try {
    std::istringstream in(std::string(as_chars(body)));
    pt::ptree tree;
    pt::read_xml(in, tree);
    return tree.get<std::string>("Error.Code", "");
  } catch (const std::exception&) {
    return "";
  }
}

S3Client::S3Client(S3ClientOptions options, Credentials credentials)
    : options_(std::move(options)),
      credentials_(std::move(credentials)),
      http_(Endpoint::parse(options_.endpoint), options_.http) {}

std::string S3Client::describe(const std::string& bucket) const { return "s3://" + bucket + " at " + options_.endpoint; }

HttpResponse S3Client::execute(const Request& r, const std::function<void(Headers&)>& before_attempt) {
  const Endpoint& ep = http_.endpoint();
  SigningRequest sr;
  sr.method = r.method;
  if (options_.virtual_hosted && !r.bucket.empty()) {
    sr.host = r.bucket + "." + ep.host_header();
    sr.path = "/" + r.key;
  } else {
    sr.host = ep.host_header();
    sr.path = "/" + r.bucket + (r.key.empty() && r.bucket.empty() ? "" : "/" + r.key);
    if (r.key.empty() && !r.bucket.empty()) sr.path = "/" + r.bucket;
  }
  sr.query = r.query;
  sr.payload_hash = r.payload_sha256.empty() ? std::string(kUnsignedPayload) : r.payload_sha256;

  HttpRequest hr;
  hr.method = r.method;
  hr.target = encode_path(sr.path);
  std::string query = canonical_query_string(r.query);
  if (!query.empty()) hr.target += "?" + query;
  hr.body = r.body;

  sr.headers = r.headers;
  if (before_attempt) before_attempt(sr.headers);
  hr.headers = sr.headers;
  hr.headers.emplace_back("host", sr.host);
  for (auto& h : sign_request(sr, credentials_, options_.region, std::time(nullptr))) hr.headers.push_back(h);
  ++stats_.requests;
  try {
    HttpResponse response = http_.send(hr, r.body_into);
    stats_.bytes_sent += r.body.size();
    stats_.bytes_received += response.body_size;
    return response;
  } catch (const Error& e) {
    // A timeout, a refused or broken connection: worth another attempt.
    if (e.kind() != ErrorKind::kTargetIo || e.transient()) throw;
    throw Error(e.kind(), e.what(), Persistence::kTransient);
  }
}

HttpResponse S3Client::execute_payload(Request r) {
  const bool upload = !r.body_into;
  const size_t length = upload ? r.body.size() : r.body_into->size();
  if (options_.rdma && upload) {
    // The same checksum over both paths, so an object is stored alike however it travelled.
    Crc crc32c(CrcAlgorithm::kCrc32c);
    crc32c.update(r.body);
    r.headers.emplace_back("x-amz-checksum-crc32c", to_base64(crc32c.big_endian()));
  }
  if (options_.rdma && length > 0 && length <= options_.rdma->max_transfer()) {
    if (auto response = execute_rdma(r)) return *response;
    ++stats_.rdma_fallbacks;
  }
  const auto started = std::chrono::steady_clock::now();
  HttpResponse response = execute(r);
  (upload ? stats_.http_put : stats_.http_get).add(upload ? length : response.body_size,
                                                    std::chrono::steady_clock::now() - started);
  return response;
}

std::optional<HttpResponse> S3Client::execute_rdma(const Request& r) {
  const bool upload = !r.body_into;
  const size_t length = upload ? r.body.size() : r.body_into->size();
  RdmaChannel& channel = *options_.rdma;
  std::optional<rdma::Slot> slot = channel.acquire();
  if (!slot) return std::nullopt;
  Request over = r;  // the same request with an empty body; the slot holds the bytes
  over.body = {};
  over.body_into.reset();
  if (upload) std::memcpy(slot->data().data(), r.body.data(), length);

  const auto started = std::chrono::steady_clock::now();
  HttpResponse response;
  try {
    // A fresh one-use token per attempt: a retry after a broken connection may
    // need a new session, and the server spends every nonce it admits.
    response = execute(over, [&](Headers& headers) {
      std::optional<std::string> token = channel.grant(*slot, length);
      if (!token) throw NoRdmaSession{};
      headers.emplace_back(rdma::kTokenHeader, *token);
    });
  } catch (const NoRdmaSession&) {
    return std::nullopt;
  }
  const std::string reply = response.header(rdma::kReplyHeader);
  if (response.status == 501 || reply == "501") return std::nullopt;  // declined
  if (reply.empty()) {
    // A 2xx without a reply ignored the token; anything else (NoSuchKey, 416)
    // is the server's answer about the object, the same as over HTTP.
    if (response.status / 100 == 2) return std::nullopt;
    return response;
  }
  if (reply.front() != '2') {
    // The token was refused (a restarted server knows no such session): a new
    // session for the next request, HTTP for this one.
    channel.distrust();
    return std::nullopt;
  }
  if (upload) {
    stats_.rdma_put.add(length, std::chrono::steady_clock::now() - started);
    return response;
  }
  const std::string moved = response.header(rdma::kBytesTransferredHeader);
  const bool well_formed =
      !moved.empty() && moved.size() <= 19 && moved.find_first_not_of("0123456789") == std::string::npos;
  const uint64_t bytes = well_formed ? std::stoull(moved) : 0;
  if (!well_formed || bytes > length) {
    throw Error(ErrorKind::kIntegrity, describe(r.bucket) + "/" + r.key + ": the server says it wrote '" + moved +
                                           "' bytes by RDMA into a " + std::to_string(length) + "-byte buffer");
  }
  std::memcpy(r.body_into->data(), slot->data().data(), bytes);
  response.body_size = bytes;
  // Servers disagree on where the range's status goes: either saying 206 makes it partial content.
  if (response.status == 206 || reply == "206") response.status = 206;
  stats_.rdma_get.add(bytes, std::chrono::steady_clock::now() - started);
  return response;
}

void S3Client::fail(const Request& r, const HttpResponse& response) const {
  std::string code = s3_error_code(response.body), message;
  if (!code.empty()) {
    try {
      message = parse_xml(response.body, "error").get<std::string>("Error.Message", "");
    } catch (const Error&) {
    }
  }
  std::string what = r.method + " s3://" + r.bucket + "/" + r.key + " at " + options_.endpoint + ": HTTP " +
                     std::to_string(response.status) + (code.empty() ? "" : " " + code) +
                     (message.empty() ? "" : " (" + message + ")");
  if (response.status == 404) throw Error(ErrorKind::kNotFound, what);
  if (response.status == 403 || response.status == 401) throw Error(ErrorKind::kTargetIo, what + ": check the credentials");
  throw Error(ErrorKind::kTargetIo, what, retryable(response.status, code) ? Persistence::kTransient : Persistence::kPermanent);
}

void S3Client::create_bucket(const std::string& bucket) {
  // us-east-1 takes no location constraint (and Ceph refuses one naming it).
  std::string body;
  if (options_.region != "us-east-1" && !options_.region.empty()) {
    body = "<CreateBucketConfiguration><LocationConstraint>" + xml_escape(options_.region) +
           "</LocationConstraint></CreateBucketConfiguration>";
  }
  Request r{"PUT", bucket, "", {}, {}, as_bytes(body), {}};
  HttpResponse resp = execute(r);
  if (resp.status / 100 != 2 && s3_error_code(resp.body) != "BucketAlreadyOwnedByYou") fail(r, resp);
}

S3Client::Request S3Client::upload_request(const std::string& bucket, const std::string& key,
                                           std::vector<std::pair<std::string, std::string>> query, ByteView data,
                                           std::optional<Bytes>& md5_sent, bool locked) const {
  Request r{"PUT", bucket, key, std::move(query), {}, data, {}};
  if (options_.rdma || locked) {
    // The RDMA path carries the body outside the signed request; S3 wants
    // Content-MD5 (or a checksum) with every locked upload.
    md5_sent = md5(data);
    r.headers.emplace_back("content-md5", to_base64(*md5_sent));
  }
  if (!options_.rdma) r.payload_sha256 = sha256_hex(data);
  return r;
}

void S3Client::add_object_acl(Request& r) const {
  if (!options_.object_acl.empty()) r.headers.emplace_back("x-amz-acl", options_.object_acl);
}

void S3Client::put_object(const std::string& bucket, const std::string& key, ByteView data,
                          const std::optional<Retention>& retention) {
  std::optional<Bytes> digest;
  Request r = upload_request(bucket, key, {}, data, digest, retention.has_value());
  add_object_acl(r);
  add_lock_headers(r.headers, retention);
  HttpResponse resp = execute_payload(r);
  if (resp.status / 100 != 2) fail(r, resp);
  std::string etag = unquote(resp.header("etag"));
  if (digest && !etag.empty() && etag != to_hex(*digest)) {
    throw Error(ErrorKind::kIntegrity, describe(bucket) + "/" + key + ": ETag " + etag + " does not match the MD5 sent");
  }
}

std::string S3Client::create_multipart_upload(const std::string& bucket, const std::string& key,
                                              const std::optional<Retention>& retention) {
  Request r{"POST", bucket, key, {{"uploads", ""}}, {}, {}, {}};
  add_object_acl(r);
  add_lock_headers(r.headers, retention);
  HttpResponse resp = execute(r);
  if (resp.status / 100 != 2) fail(r, resp);
  std::string id = parse_xml(resp.body, "CreateMultipartUpload").get<std::string>("InitiateMultipartUploadResult.UploadId", "");
  if (id.empty()) throw Error(ErrorKind::kTargetIo, describe(bucket) + "/" + key + ": no UploadId in the reply");
  return id;
}

std::string S3Client::upload_part(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                  uint32_t part_number, ByteView data, bool locked) {
  std::optional<Bytes> digest;
  Request r = upload_request(bucket, key, {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}},
                             data, digest, locked);
  HttpResponse resp = execute_payload(r);
  if (resp.status / 100 != 2) fail(r, resp);
  std::string etag = unquote(resp.header("etag"));
  // Without an MD5 sent, the ETag must still be one: it names the part in
  // the completion, whose ETag is checked against it.
  if (digest ? etag != to_hex(*digest) : (etag.size() != 32 || etag.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    throw Error(ErrorKind::kIntegrity, describe(bucket) + "/" + key + " part " + std::to_string(part_number) +
                                           ": ETag '" + etag + "' does not match the MD5 sent");
  }
  return etag;
}

void S3Client::complete_multipart_upload(const std::string& bucket, const std::string& key,
                                         const std::string& upload_id,
                                         const std::vector<std::pair<uint32_t, std::string>>& parts) {
  std::string body = "<CompleteMultipartUpload>";
  Bytes concatenated;
  for (const auto& [number, etag] : parts) {
    body += "<Part><PartNumber>" + std::to_string(number) + "</PartNumber><ETag>\"" + etag + "\"</ETag></Part>";
    Bytes raw = from_hex(etag);
    concatenated.insert(concatenated.end(), raw.begin(), raw.end());
  }
  body += "</CompleteMultipartUpload>";
  Request r{"POST", bucket, key, {{"uploadId", upload_id}}, {{"content-type", "application/xml"}}, as_bytes(body), {}};
  HttpResponse resp = execute(r);
  // Complete may fail inside a 200 reply; a retried complete of an upload
  // that already completed says NoSuchUpload: the object tells the truth.
  std::string code = s3_error_code(resp.body);
  std::string expected = to_hex(md5(concatenated)) + "-" + std::to_string(parts.size());
  if (resp.status / 100 == 2 && code.empty()) {
    std::string etag = unquote(parse_xml(resp.body, "CompleteMultipartUpload")
                                   .get<std::string>("CompleteMultipartUploadResult.ETag", ""));
    if (!etag.empty() && etag != expected) {
      throw Error(ErrorKind::kIntegrity, describe(bucket) + "/" + key + ": multipart ETag " + etag + ", expected " + expected);
    }
    return;
  }
  if (code == "NoSuchUpload") {
    std::optional<ObjectHead> head = head_object(bucket, key);
    if (head && unquote(head->etag) == expected) return;
  }
  fail(r, resp);
}

void S3Client::abort_multipart_upload(const std::string& bucket, const std::string& key, const std::string& upload_id) {
  Request r{"DELETE", bucket, key, {{"uploadId", upload_id}}, {}, {}, {}};
  HttpResponse resp = execute(r);
  if (resp.status / 100 != 2 && resp.status != 404) fail(r, resp);
}

std::vector<MultipartUploadInfo> S3Client::list_multipart_uploads(const std::string& bucket, const std::string& prefix) {
  std::vector<MultipartUploadInfo> out;
  std::string key_marker, id_marker;
  for (;;) {
    Request r{"GET", bucket, "", {{"uploads", ""}, {"prefix", prefix}}, {}, {}, {}};
    if (!key_marker.empty()) {
      r.query.emplace_back("key-marker", key_marker);
      r.query.emplace_back("upload-id-marker", id_marker);
    }
    HttpResponse resp = execute(r);
    if (resp.status / 100 != 2) fail(r, resp);
    pt::ptree tree = parse_xml(resp.body, "ListMultipartUploads");
    pt::ptree result = child(tree, "ListMultipartUploadsResult");
    for (const auto& [name, node] : result) {
      if (name != "Upload") continue;
      out.push_back({node.get<std::string>("Key", ""), node.get<std::string>("UploadId", ""),
                     node.get<std::string>("Initiated", "")});
    }
    if (result.get<std::string>("IsTruncated", "false") != "true") return out;
    key_marker = result.get<std::string>("NextKeyMarker", "");
    id_marker = result.get<std::string>("NextUploadIdMarker", "");
    if (key_marker.empty()) return out;
  }
}

size_t S3Client::get_range(const std::string& bucket, const std::string& key, uint64_t offset, std::span<uint8_t> out) {
  if (out.empty()) return 0;
  Request r{"GET", bucket, key, {}, {{"range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + out.size() - 1)}},
            {}, out};
  HttpResponse resp = execute_payload(r);
  if (resp.status == 416) return 0;  // offset at or past the end
  if (resp.status == 206 || (resp.status == 200 && offset == 0)) return resp.body_size;
  fail(r, resp);
}

std::optional<ObjectHead> S3Client::head_object(const std::string& bucket, const std::string& key) {
  Request r{"HEAD", bucket, key, {}, {}, {}, {}};
  HttpResponse resp = execute(r);
  if (resp.status == 404) return std::nullopt;
  if (resp.status / 100 != 2) fail(r, resp);
  ObjectHead head{std::stoull(resp.header("content-length").empty() ? "0" : resp.header("content-length")),
                  resp.header("etag"), std::nullopt};
  const std::optional<LockMode> mode = parse_lock_mode(resp.header("x-amz-object-lock-mode"));
  const std::optional<int64_t> until = parse_iso8601_utc(resp.header("x-amz-object-lock-retain-until-date"));
  if (mode && until) head.retention = Retention{*mode, *until};
  return head;
}

void S3Client::put_object_retention(const std::string& bucket, const std::string& key, const Retention& retention) {
  const std::string body = "<Retention xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Mode>" +
                           std::string(lock_mode_name(retention.mode)) + "</Mode><RetainUntilDate>" +
                           iso8601_utc(retention.until_unix) + "</RetainUntilDate></Retention>";
  Request r{"PUT", bucket, key, {{"retention", ""}},
            {{"content-md5", to_base64(md5(as_bytes(body)))}, {"content-type", "application/xml"}}, as_bytes(body), {}};
  r.payload_sha256 = sha256_hex(as_bytes(body));
  HttpResponse resp = execute(r);
  if (resp.status / 100 != 2) fail(r, resp);
}

bool S3Client::object_lock_enabled(const std::string& bucket) {
  Request r{"GET", bucket, "", {{"object-lock", ""}}, {}, {}, {}};
  HttpResponse resp = execute(r);
  const std::string code = s3_error_code(resp.body);
  if (code == "ObjectLockConfigurationNotFoundError") return false;
  if (resp.status / 100 != 2) fail(r, resp);
  return parse_xml(resp.body, "GetObjectLockConfiguration").get<std::string>("ObjectLockConfiguration.ObjectLockEnabled", "") ==
         "Enabled";
}

void S3Client::list_objects(const std::string& bucket, const std::string& prefix,
                            const std::function<void(const std::string&, uint64_t, int64_t)>& fn) {
  std::string token;
  for (;;) {
    Request r{"GET", bucket, "", {{"list-type", "2"}, {"prefix", prefix}, {"max-keys", "1000"}}, {}, {}, {}};
    if (!token.empty()) r.query.emplace_back("continuation-token", token);
    HttpResponse resp = execute(r);
    if (resp.status / 100 != 2) fail(r, resp);
    pt::ptree tree = parse_xml(resp.body, "ListObjectsV2");
    pt::ptree result = child(tree, "ListBucketResult");
    for (const auto& [name, node] : result) {
      if (name != "Contents") continue;
      const std::string key = node.get<std::string>("Key", "");
      const std::optional<int64_t> modified = parse_iso8601_utc(node.get<std::string>("LastModified", ""));
      if (!modified) {
        throw Error(ErrorKind::kTargetIo, describe(bucket) + "/" + key + ": the listing gives no valid LastModified ('" +
                                              node.get<std::string>("LastModified", "") + "')");
      }
      fn(key, node.get<uint64_t>("Size", 0), *modified);
    }
    if (result.get<std::string>("IsTruncated", "false") != "true") return;
    token = result.get<std::string>("NextContinuationToken", "");
    if (token.empty()) throw Error(ErrorKind::kTargetIo, describe(bucket) + ": truncated listing without a continuation token");
  }
}

void S3Client::delete_object(const std::string& bucket, const std::string& key) {
  Request r{"DELETE", bucket, key, {}, {}, {}, {}};
  HttpResponse resp = execute(r);
  if (resp.status / 100 != 2 && resp.status != 404) fail(r, resp);
}

void S3Client::delete_objects(const std::string& bucket, const std::vector<std::string>& keys) {
  for (size_t start = 0; start < keys.size(); start += 1000) {
    std::string body = "<Delete><Quiet>true</Quiet>";
    for (size_t i = start; i < std::min(keys.size(), start + 1000); ++i) {
      body += "<Object><Key>" + xml_escape(keys[i]) + "</Key></Object>";
    }
    body += "</Delete>";
    Request r{"POST", bucket, "", {{"delete", ""}}, {{"content-md5", to_base64(md5(as_bytes(body)))}, {"content-type", "application/xml"}},
              as_bytes(body), {}};
    HttpResponse resp = execute(r);
    if (resp.status / 100 != 2) fail(r, resp);
    pt::ptree tree = parse_xml(resp.body, "DeleteObjects");
    for (const auto& [name, node] : child(tree, "DeleteResult")) {
      if (name == "Error") {
        throw Error(ErrorKind::kTargetIo, describe(bucket) + "/" + node.get<std::string>("Key", "") + ": delete failed: " +
                                              node.get<std::string>("Code", "") + " " + node.get<std::string>("Message", ""));
      }
    }
  }
}

void S3Client::list_object_versions(const std::string& bucket, const std::string& prefix,
                                    const std::function<void(const ObjectVersion&)>& fn) {
  std::string key_marker, version_marker;
  for (;;) {
    Request r{"GET", bucket, "", {{"versions", ""}, {"prefix", prefix}, {"max-keys", "1000"}}, {}, {}, {}};
    if (!key_marker.empty()) {
      r.query.emplace_back("key-marker", key_marker);
      if (!version_marker.empty()) r.query.emplace_back("version-id-marker", version_marker);
    }
    HttpResponse resp = execute(r);
    if (resp.status / 100 != 2) fail(r, resp);
    pt::ptree tree = parse_xml(resp.body, "ListObjectVersions");
    pt::ptree result = child(tree, "ListVersionsResult");
    for (const auto& [name, node] : result) {
      if (name != "Version" && name != "DeleteMarker") continue;
      ObjectVersion v;
      v.key = node.get<std::string>("Key", "");
      v.version_id = node.get<std::string>("VersionId", "");
      v.delete_marker = name == "DeleteMarker";
      v.latest = node.get<std::string>("IsLatest", "false") == "true";
      v.size = node.get<uint64_t>("Size", 0);
      v.modified_unix = parse_iso8601_utc(node.get<std::string>("LastModified", "")).value_or(0);
      fn(v);
    }
    if (result.get<std::string>("IsTruncated", "false") != "true") return;
    key_marker = result.get<std::string>("NextKeyMarker", "");
    version_marker = result.get<std::string>("NextVersionIdMarker", "");
    if (key_marker.empty()) {
      throw Error(ErrorKind::kTargetIo, describe(bucket) + ": truncated version listing without a key marker");
    }
  }
}

size_t S3Client::get_version_range(const std::string& bucket, const std::string& key, const std::string& version_id,
                                   uint64_t offset, std::span<uint8_t> out) {
  if (out.empty()) return 0;
  Request r{"GET", bucket, key, {{"versionId", version_id}},
            {{"range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + out.size() - 1)}}, {}, out};
  HttpResponse resp = execute(r);
  if (resp.status == 416) return 0;  // offset at or past the end
  if (resp.status == 206 || (resp.status == 200 && offset == 0)) return resp.body_size;
  fail(r, resp);
}

void S3Client::delete_object_version(const std::string& bucket, const std::string& key, const std::string& version_id,
                                     bool bypass_governance) {
  Request r{"DELETE", bucket, key, {{"versionId", version_id}}, {}, {}, {}};
  if (bypass_governance) r.headers.emplace_back("x-amz-bypass-governance-retention", "true");
  HttpResponse resp = execute(r);
  if (resp.status / 100 != 2 && resp.status != 404) fail(r, resp);
}

}  // namespace keel::targets::s3
