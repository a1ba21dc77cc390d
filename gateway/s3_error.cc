#include "gateway/s3_error.h"

#include <algorithm>
#include <array>

#include "util/xml.h"

namespace keel::gateway {

namespace {

struct CodeStatus {
  std::string_view code;
  int status;
};

// The codes the gateway returns, with the status the S3 API reference gives them.
constexpr std::array kCodes = {
    CodeStatus{"AccessDenied", 403},
    CodeStatus{"AccessForbidden", 403},
    CodeStatus{"AccessControlListNotSupported", 400},
    CodeStatus{"AuthorizationHeaderMalformed", 400},
    CodeStatus{"AuthorizationQueryParametersError", 400},
    CodeStatus{"BadDigest", 400},
    CodeStatus{"BadRequest", 400},
    CodeStatus{"BucketAlreadyExists", 409},
    CodeStatus{"BucketAlreadyOwnedByYou", 409},
    CodeStatus{"BucketNotEmpty", 409},
    CodeStatus{"ConditionalRequestConflict", 409},
    CodeStatus{"EntityTooLarge", 400},
    CodeStatus{"EntityTooSmall", 400},
    CodeStatus{"IncompleteBody", 400},
    CodeStatus{"IncorrectNumberOfFilesInPostRequest", 400},
    CodeStatus{"InternalError", 500},
    CodeStatus{"InvalidAccessKeyId", 403},
    CodeStatus{"InvalidArgument", 400},
    CodeStatus{"InvalidBucketAclWithObjectOwnership", 400},
    CodeStatus{"InvalidBucketState", 409},
    CodeStatus{"InvalidBucketName", 400},
    CodeStatus{"InvalidDigest", 400},
    CodeStatus{"InvalidEncryptionAlgorithmError", 400},
    CodeStatus{"InvalidPart", 400},
    CodeStatus{"InvalidPartNumber", 416},
    CodeStatus{"InvalidPartOrder", 400},
    CodeStatus{"InvalidPolicyDocument", 400},
    CodeStatus{"InvalidRange", 416},
    CodeStatus{"InvalidRequest", 400},
    CodeStatus{"InvalidRetentionPeriod", 400},
    CodeStatus{"InvalidStorageClass", 400},
    CodeStatus{"InvalidTag", 400},
    CodeStatus{"InvalidURI", 400},
    CodeStatus{"KMS.NotFoundException", 400},
    CodeStatus{"KeyTooLongError", 400},
    CodeStatus{"MalformedACLError", 400},
    CodeStatus{"MalformedPOSTRequest", 400},
    CodeStatus{"MalformedPolicy", 400},
    CodeStatus{"MalformedXML", 400},
    CodeStatus{"MaxMessageLengthExceeded", 400},
    CodeStatus{"MaxPostPreDataLengthExceededError", 400},
    CodeStatus{"MetadataTooLarge", 400},
    CodeStatus{"MethodNotAllowed", 405},
    CodeStatus{"MissingContentLength", 411},
    CodeStatus{"MissingSecurityHeader", 400},
    CodeStatus{"NoSuchBucket", 404},
    CodeStatus{"NoSuchBucketPolicy", 404},
    CodeStatus{"NoSuchKey", 404},
    CodeStatus{"NoSuchLifecycleConfiguration", 404},
    CodeStatus{"NoSuchObjectLockConfiguration", 404},
    CodeStatus{"NoSuchTagSet", 404},
    CodeStatus{"NoSuchCORSConfiguration", 404},
    CodeStatus{"ServerSideEncryptionConfigurationNotFoundError", 404},
    CodeStatus{"NoSuchPublicAccessBlockConfiguration", 404},
    CodeStatus{"NoSuchUpload", 404},
    CodeStatus{"NoSuchVersion", 404},
    CodeStatus{"NotImplemented", 501},
    CodeStatus{"ObjectLockConfigurationNotFoundError", 404},
    CodeStatus{"OwnershipControlsNotFoundError", 404},
    CodeStatus{"PreconditionFailed", 412},
    CodeStatus{"RequestTimeTooSkewed", 403},
    CodeStatus{"SignatureDoesNotMatch", 403},
    CodeStatus{"UnexpectedContent", 400},
    CodeStatus{"UnresolvableGrantByEmailAddress", 400},
    CodeStatus{"XAmzContentSHA256Mismatch", 400},
};

int status_of(std::string_view code) {
  const auto it = std::find_if(kCodes.begin(), kCodes.end(), [&](const CodeStatus& c) { return c.code == code; });
  return it == kCodes.end() ? 500 : it->status;
}

bool known(std::string_view code) {
  return std::any_of(kCodes.begin(), kCodes.end(), [&](const CodeStatus& c) { return c.code == code; });
}

}  // namespace

S3Error::S3Error(std::string_view code, const std::string& message)
    : std::runtime_error(message),
      code_(known(code) ? std::string(code) : "InternalError"),
      status_(status_of(code_)) {}

std::string error_document(const S3Error& error, std::string_view resource, std::string_view request_id) {
  XmlWriter xml;
  xml.open("Error").element("Code", error.code()).element("Message", error.what());
  if (!resource.empty()) xml.element("Resource", resource);
  xml.element("RequestId", request_id);
  for (const auto& [name, value] : error.details) xml.element(name, value);
  return xml.finish();
}

}  // namespace keel::gateway
