#include "gateway/encryption.h"

#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "gateway/xml_reader.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr const char* kSseS3 = "AES256";

bool writes_object(Operation operation) {
  return operation == Operation::kPutObject || operation == Operation::kCopyObject ||
         operation == Operation::kCreateMultipartUpload;
}

bool names_customer_key(const S3Request& request) {
  for (const auto& [name, value] : request.headers) {
    if (name.starts_with("x-amz-server-side-encryption-customer-") ||
        name.starts_with("x-amz-copy-source-server-side-encryption-customer-")) {
      return true;
    }
  }
  return false;
}

}  // namespace

void check_encryption_headers(const S3Request& request, Operation operation, bool encrypted_at_rest) {
  const bool reads = operation == Operation::kGetObject || operation == Operation::kHeadObject;
  const bool parts = operation == Operation::kUploadPart || operation == Operation::kUploadPartCopy;
  if (!reads && !parts && !writes_object(operation)) return;
  if (names_customer_key(request)) {
    throw S3Error("InvalidArgument", "server-side encryption with customer-provided keys (SSE-C) is not supported: "
                                     "the gateway encrypts dedupe buckets with the repository's key");
  }
  const std::string sse = request.header("x-amz-server-side-encryption");
  const bool kms_key = request.has_header("x-amz-server-side-encryption-aws-kms-key-id");
  if (sse.empty() && !kms_key) return;
  if (!writes_object(operation)) {
    // As S3: an object's encryption is chosen when it is written, not asked for on reads.
    throw S3Error("InvalidArgument", "x-amz-server-side-encryption is only valid when an object is written");
  }
  if (kms_key && sse != "aws:kms") {
    throw S3Error("InvalidArgument", "Server Side Encryption with AWS KMS managed key requires HTTP header "
                                     "x-amz-server-side-encryption : aws:kms");
  }
  if (sse != kSseS3) {
    throw S3Error("InvalidArgument", "x-amz-server-side-encryption '" + sse +
                                         "' is not supported: the gateway has no KMS; AES256 (SSE-S3) is");
  }
  if (!encrypted_at_rest) throw unencrypted_bucket(request.bucket, "x-amz-server-side-encryption: AES256");
}

S3Error unencrypted_bucket(const std::string& bucket, const std::string& asked) {
  return S3Error("InvalidArgument", "the bucket '" + bucket + "' is a raw bucket, whose objects are stored "
                                    "unencrypted; " + asked + " needs a dedupe bucket");
}

bool reports_encryption(Operation operation) {
  switch (operation) {
    case Operation::kPutObject:
    case Operation::kCopyObject:
    case Operation::kGetObject:
    case Operation::kHeadObject:
    case Operation::kCreateMultipartUpload:
    case Operation::kUploadPart:
    case Operation::kUploadPartCopy:
    case Operation::kCompleteMultipartUpload:
      return true;
    default:
      return false;
  }
}

std::string encryption_configuration(const std::string& xml) {
  const auto tree = read_xml_body(xml);
  const auto root = tree.get_child_optional("ServerSideEncryptionConfiguration");
  if (!root) throw S3Error("MalformedXML", "the body is not a <ServerSideEncryptionConfiguration> document");
  size_t rules = 0;
  for (const auto& [name, rule] : *root) {
    if (name != "Rule") continue;
    ++rules;
    const std::string algorithm = xml_value(rule, "ApplyServerSideEncryptionByDefault.SSEAlgorithm");
    if (algorithm != kSseS3) {
      throw S3Error("InvalidArgument", "SSEAlgorithm '" + algorithm +
                                           "' is not supported: the gateway has no KMS; AES256 (SSE-S3) is");
    }
  }
  if (rules != 1) throw S3Error("MalformedXML", "a ServerSideEncryptionConfiguration holds one Rule");
  XmlWriter out;
  out.open("ServerSideEncryptionConfiguration", kS3Namespace)
      .open("Rule")
      .open("ApplyServerSideEncryptionByDefault")
      .element("SSEAlgorithm", kSseS3);
  return out.finish();
}

}  // namespace keel::gateway
