// S3 errors: a code from the S3 API reference (which fixes the HTTP status),
// a message for people, and the XML document every failed request returns.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::gateway {

class S3Error : public std::runtime_error {
 public:
  // `code` must be one of the codes this module knows (see s3_error.cc);
  // an unknown code is reported as InternalError.
  S3Error(std::string_view code, const std::string& message);

  const std::string& code() const { return code_; }
  int http_status() const { return status_; }
  // Further elements of the error document (SignatureDoesNotMatch carries
  // the string to sign, so a client's author can see what differed).
  std::vector<std::pair<std::string, std::string>> details;
  // Headers the error response carries (x-amz-delete-marker on a deleted key).
  std::vector<std::pair<std::string, std::string>> headers;

 private:
  std::string code_;
  int status_;
};

// <Error><Code/><Message/><Resource/><RequestId/>...details</Error>
std::string error_document(const S3Error& error, std::string_view resource, std::string_view request_id);

}  // namespace keel::gateway
