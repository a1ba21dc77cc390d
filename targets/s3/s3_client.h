// The S3 operations keel needs, over HttpClient, signed with SigV4, one
// attempt each: throttling, 5xx, timeouts and broken connections fail with a
// transient keel::Error that targets/retrying_target.h retries. Every upload
// carries a check the server verifies: over HTTP the body's SHA-256 in the
// signature (x-amz-content-sha256; with SHA extensions it costs less than half
// of MD5), over RDMA Content-MD5 and a CRC32C, and the MD5 ETag that comes back
// is compared. Errors name the bucket, key and S3 error code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "targets/retention.h"
#include "targets/s3/http_client.h"
#include "targets/s3/rdma_channel.h"
#include "targets/s3/sigv4.h"
#include "targets/versioned_store.h"

namespace keel::targets::s3 {

struct S3ClientOptions {
  std::string endpoint;  // "https://s3.example.com:443"
  std::string region = "us-east-1";
  bool virtual_hosted = false;  // bucket.host/key instead of host/bucket/key
  HttpOptions http;
  // Object payloads (PutObject and UploadPart bodies, ranged GETs) over RDMA
  // when set; HTTP carries whatever it declines or cannot fit in a slot.
  std::shared_ptr<RdmaChannel> rdma;
  // A canned ACL (x-amz-acl) sent with every object created; empty: none.
  std::string object_acl;
};

struct ObjectHead {
  uint64_t size = 0;
  std::string etag;
  std::optional<Retention> retention;  // x-amz-object-lock-mode and -retain-until-date
};

struct MultipartUploadInfo {
  std::string key;
  std::string upload_id;
  std::string initiated;  // ISO 8601, as the server said
};

// Object payloads moved one way: how many, their bytes, and the time from
// sending the request to the response.
struct PayloadStats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> microseconds{0};
  void add(uint64_t payload_bytes, std::chrono::steady_clock::duration took);
};

// Counters for tests and stats output.
struct S3Stats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes_sent{0};      // HTTP bodies
  std::atomic<uint64_t> bytes_received{0};  // HTTP bodies
  // Uploads (PutObject, UploadPart) and ranged GETs, by the path their bytes took.
  PayloadStats rdma_put, rdma_get, http_put, http_get;
  // Payloads that tried RDMA and went over HTTP after all: declined by the
  // server, refused token, or no session to be had.
  std::atomic<uint64_t> rdma_fallbacks{0};
};

class S3Client {
 public:
  S3Client(S3ClientOptions options, Credentials credentials);

  void create_bucket(const std::string& bucket);
  // With a retention, the object is locked (x-amz-object-lock-mode and
  // -retain-until-date) and the body carries Content-MD5, which S3 demands then.
  void put_object(const std::string& bucket, const std::string& key, ByteView data,
                  const std::optional<Retention>& retention = std::nullopt);
  std::string create_multipart_upload(const std::string& bucket, const std::string& key,
                                      const std::optional<Retention>& retention = std::nullopt);
  // Returns the part's ETag (checked against the MD5 of `data`). `locked`:
  // the upload was created with a retention, so the part carries Content-MD5.
  std::string upload_part(const std::string& bucket, const std::string& key, const std::string& upload_id,
                          uint32_t part_number, ByteView data, bool locked = false);
  // PutObjectRetention (?retention): no data moves.
  void put_object_retention(const std::string& bucket, const std::string& key, const Retention& retention);
  // GetObjectLockConfiguration: whether the bucket has ObjectLockEnabled.
  bool object_lock_enabled(const std::string& bucket);
  void complete_multipart_upload(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                 const std::vector<std::pair<uint32_t, std::string>>& parts);
  void abort_multipart_upload(const std::string& bucket, const std::string& key, const std::string& upload_id);
  std::vector<MultipartUploadInfo> list_multipart_uploads(const std::string& bucket, const std::string& prefix);
  // Reads [offset, offset + out.size()); returns bytes read (short at the end of the object).
  // Throws Error(kNotFound) for a missing key.
  size_t get_range(const std::string& bucket, const std::string& key, uint64_t offset, std::span<uint8_t> out);
  std::optional<ObjectHead> head_object(const std::string& bucket, const std::string& key);
  // ListObjectsV2 with continuation tokens; calls fn(key, size, LastModified
  // in Unix seconds).
  void list_objects(const std::string& bucket, const std::string& prefix,
                    const std::function<void(const std::string&, uint64_t, int64_t)>& fn);
  void delete_object(const std::string& bucket, const std::string& key);
  // DeleteObjects, 1000 keys per request.
  void delete_objects(const std::string& bucket, const std::vector<std::string>& keys);

  // Versions (versioned and Object Lock buckets): ListObjectVersions with
  // key and version markers, every version and delete marker, each key's newest first.
  void list_object_versions(const std::string& bucket, const std::string& prefix,
                            const std::function<void(const ObjectVersion&)>& fn);
  // get_range of one version (GetObject with versionId).
  size_t get_version_range(const std::string& bucket, const std::string& key, const std::string& version_id,
                           uint64_t offset, std::span<uint8_t> out);
  // DeleteObject with versionId: that version is gone for good. A version
  // already gone is no error.
  void delete_object_version(const std::string& bucket, const std::string& key, const std::string& version_id,
                             bool bypass_governance);

  const S3Stats& stats() const { return stats_; }
  // The RDMA channel's reconnects (0 without one).
  uint64_t rdma_reconnects() const { return options_.rdma ? options_.rdma->reconnects() : 0; }
  std::string describe(const std::string& bucket) const;

 private:
  struct Request {
    std::string method;
    std::string bucket;
    std::string key;
    std::vector<std::pair<std::string, std::string>> query;
    Headers headers;
    ByteView body;
    std::optional<std::span<uint8_t>> body_into;
    // Lowercase hex SHA-256 of the body, signed so that the server refuses a
    // body that does not match it; empty: UNSIGNED-PAYLOAD.
    std::string payload_sha256 = {};
  };
  // Signs and sends once; returns the response (any status). A failed send
  // throws a transient Error. `before_attempt` adds headers to sign (a fresh RDMA token).
  HttpResponse execute(const Request& request, const std::function<void(Headers&)>& before_attempt = {});
  // A PUT of `data` with the check the server verifies (see the top of this
  // file); `md5_sent` is set when that check is Content-MD5.
  Request upload_request(const std::string& bucket, const std::string& key,
                         std::vector<std::pair<std::string, std::string>> query, ByteView data,
                         std::optional<Bytes>& md5_sent, bool locked) const;
  // Adds the configured canned ACL to a request that creates an object.
  void add_object_acl(Request& request) const;
  // A request with an object payload (an upload's body, or a GET into
  // body_into): over RDMA when configured and the server agrees, else HTTP.
  HttpResponse execute_payload(Request request);
  // The RDMA attempt; nullopt when it must go over HTTP instead.
  std::optional<HttpResponse> execute_rdma(const Request& request);
  [[noreturn]] void fail(const Request& request, const HttpResponse& response) const;

  S3ClientOptions options_;
  Credentials credentials_;
  HttpClient http_;
  mutable S3Stats stats_;
};

// The S3 error code in an XML error body ("NoSuchKey"), or "".
std::string s3_error_code(ByteView body);

}  // namespace keel::targets::s3
