// An S3 request as the gateway sees it: method, bucket and key (path-style
// or virtual-hosted addressing), decoded query parameters and headers, and
// which S3 operation it asks for.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::gateway {

using NameValues = std::vector<std::pair<std::string, std::string>>;

struct S3Request {
  std::string method;     // "GET"
  std::string target;     // the request target as received: "/bucket/key?query"
  std::string host;       // the Host header
  std::string path;       // the target's path, percent-decoded
  std::string bucket;     // empty: the service (ListBuckets)
  std::string key;        // empty: a bucket operation
  NameValues query;       // percent-decoded, in the order received
  NameValues headers;     // names lower case, in the order received
  bool virtual_hosted = false;
  std::string client_address;  // the peer's IP address, for bucket policies (aws:SourceIp)
  bool secure = false;         // it came over TLS

  // The first header of that (lower-case) name, or "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  bool has_query(std::string_view name) const;
  std::optional<std::string> query_value(std::string_view name) const;
  // "/bucket/key": how errors name the resource.
  std::string resource() const;
};

// Splits the target and reads the addressing. Header names must be lower
// case already. `domains`: Hosts "<bucket>.<domain>" are virtual-hosted.
// Throws S3Error InvalidURI on a malformed target, InvalidBucketName.
S3Request parse_request(std::string method, std::string_view target, NameValues headers,
                        const std::vector<std::string>& domains);

// Decodes %XX escapes; '+' stays '+'. Throws S3Error InvalidURI on a bad escape.
std::string percent_decode(std::string_view text);

// S3's bucket naming rules: 3 to 63 of a-z 0-9 . -, starting and ending
// with a letter or digit, no "..", not an IPv4 address.
bool is_valid_bucket_name(std::string_view name);

enum class Operation {
  kListBuckets,
  kCreateBucket,
  kDeleteBucket,
  kHeadBucket,
  kGetBucketLocation,
  kListObjects,
  kListObjectsV2,
  kDeleteObjects,
  kListMultipartUploads,
  kPutObject,
  kCopyObject,
  kGetObject,
  kHeadObject,
  kDeleteObject,
  kCreateMultipartUpload,
  kUploadPart,
  kUploadPartCopy,
  kCompleteMultipartUpload,
  kAbortMultipartUpload,
  kListParts,
  kGetBucketVersioning,
  kPutBucketVersioning,
  kListObjectVersions,
  kGetObjectLockConfiguration,
  kPutObjectLockConfiguration,
  kGetObjectRetention,
  kPutObjectRetention,
  kGetObjectLegalHold,
  kPutObjectLegalHold,
  kGetObjectTagging,
  kPutObjectTagging,
  kDeleteObjectTagging,
  kGetObjectAttributes,
  kGetBucketTagging,
  kPutBucketTagging,
  kDeleteBucketTagging,
  // Access control (access_ops.cc).
  kGetBucketAcl,
  kPutBucketAcl,
  kGetObjectAcl,
  kPutObjectAcl,
  kGetBucketPolicy,
  kPutBucketPolicy,
  kDeleteBucketPolicy,
  kGetBucketOwnershipControls,
  kPutBucketOwnershipControls,
  kDeleteBucketOwnershipControls,
  kGetPublicAccessBlock,
  kPutPublicAccessBlock,
  kDeletePublicAccessBlock,
  kGetBucketCors,
  kPutBucketCors,
  kDeleteBucketCors,
  kGetBucketEncryption,
  kPutBucketEncryption,
  kDeleteBucketEncryption,
  kGetBucketLifecycle,
  kPutBucketLifecycle,
  kDeleteBucketLifecycle,
  kPostObject,  // a browser's HTML form upload (POST /bucket)
  kGetObjectTorrent,  // answered: no torrent is kept (as Ceph RGW without torrents configured)
};

// Throws S3Error NotImplemented for S3 operations the gateway lacks (named
// in the message) and MethodNotAllowed for methods S3 has no meaning for.
Operation route(const S3Request& request);

// Whether the operation reads a request body that the handler consumes.
bool takes_body(Operation operation);

std::string_view operation_name(Operation operation);

}  // namespace keel::gateway
