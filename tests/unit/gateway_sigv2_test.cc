// AWS Signature Version 2 on the gateway: the examples of the S3 developer
// guide ("Signing and authenticating REST requests"), the per-user switch,
// dates, expiry, and the SigV4 Date fallback.
#include <catch2/catch.hpp>

#include "gateway/request.h"
#include "gateway/s3_error.h"
#include "tests/unit/s3_error_code.h"
#include "gateway/http_date.h"
#include "gateway/sigv2_verify.h"
#include "gateway/sigv4_verify.h"

using namespace keel::gateway;

namespace {

const std::vector<User> kUsers = {
    {"example", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", true},
    {"v4only", "AKIDV4ONLY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", false}};
const std::time_t kMarch27 = 1175029202;  // Tue, 27 Mar 2007 21:00:02 GMT
const std::vector<std::string> kDomains = {"s3.amazonaws.com"};

using keel::test::error_code;

S3Request request(const std::string& method, const std::string& target, NameValues headers) {
  return parse_request(method, target, std::move(headers), kDomains);
}

}  // namespace

TEST_CASE("sigv2: the developer guide's examples verify", "[gateway][sigv2]") {
  // Virtual-hosted GET.
  const auto get = request("GET", "/photos/puppy.jpg",
                           {{"host", "johnsmith.s3.amazonaws.com"},
                            {"date", "Tue, 27 Mar 2007 19:36:42 +0000"},
                            {"authorization", "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU="}});
  CHECK(sigv2_string_to_sign(get, get.header("date")) ==
        "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/johnsmith/photos/puppy.jpg");
  CHECK(authenticate(get, kUsers, kMarch27 - 4940).user->name == "example");
  CHECK(authenticate(get, kUsers, kMarch27 - 4940).payload == PayloadKind::kUnsigned);

  // PUT with a Content-Type.
  const auto put = request("PUT", "/photos/puppy.jpg",
                           {{"host", "johnsmith.s3.amazonaws.com"},
                            {"content-type", "image/jpeg"},
                            {"content-length", "94328"},
                            {"date", "Tue, 27 Mar 2007 21:15:45 +0000"},
                            {"authorization", "AWS AKIAIOSFODNN7EXAMPLE:MyyxeRY7whkBe+bq8fHCL/2kKUg="}});
  CHECK(authenticate(put, kUsers, kMarch27 + 900).user->name == "example");

  // Path-style DELETE with x-amz-date: the Date line is empty, x-amz-date is an amz header.
  const auto del = request("DELETE", "/johnsmith/photos/puppy.jpg",
                           {{"host", "s3.amazonaws.com"},
                            {"date", "Tue, 27 Mar 2007 21:20:27 +0000"},
                            {"x-amz-date", "Tue, 27 Mar 2007 21:20:26 +0000"},
                            {"authorization", "AWS AKIAIOSFODNN7EXAMPLE:R4dJ53KECjStyBO5iTBJZ4XVOaI="}});
  CHECK(authenticate(del, kUsers, kMarch27 + 1200).user->name == "example");

  // Query-string authentication: Expires takes the Date line.
  const auto url = request("GET",
                           "/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D"
                           "&Expires=1175139620",
                           {{"host", "johnsmith.s3.amazonaws.com"}});
  CHECK(authenticate(url, kUsers, 1175139620 - 10).user->name == "example");
  CHECK(error_code([&] { authenticate(url, kUsers, 1175139620 + 1); }) == "AccessDenied");
}

TEST_CASE("sigv2: both Date and x-amz-date, signed over either", "[gateway][sigv2]") {
  NameValues headers = {{"host", "s3.amazonaws.com"},
                        {"date", "Tue, 27 Mar 2007 21:20:27 +0000"},
                        {"x-amz-date", "Tue, 27 Mar 2007 21:20:26 +0000"}};
  const auto unsigned_request = request("DELETE", "/johnsmith/photos/puppy.jpg", headers);
  // As botocore and s3cmd sign: the Date header's value in the Date line as well.
  const std::string with_date = sigv2_signature(kUsers[0].secret_key,
                                                sigv2_string_to_sign(unsigned_request, "Tue, 27 Mar 2007 21:20:27 +0000"));
  headers.emplace_back("authorization", "AWS AKIAIOSFODNN7EXAMPLE:" + with_date);
  CHECK(authenticate(request("DELETE", "/johnsmith/photos/puppy.jpg", headers), kUsers, kMarch27 + 1200).user);
  headers.back().second = "AWS AKIAIOSFODNN7EXAMPLE:" + with_date.substr(1) + "A";
  CHECK(error_code([&] { authenticate(request("DELETE", "/johnsmith/photos/puppy.jpg", headers), kUsers,
                                      kMarch27 + 1200); }) == "SignatureDoesNotMatch");
}

TEST_CASE("sigv2: subresources, amz headers and errors", "[gateway][sigv2]") {
  const auto acl = request("GET", "/bucket/a%20key?versionId=v1&acl&prefix=ignored",
                           {{"host", "s3.amazonaws.com"},
                            {"x-amz-meta-b", " two "},
                            {"x-amz-meta-a", "one"},
                            {"x-amz-meta-a", "again"},
                            {"content-md5", "MD5=="}});
  CHECK(sigv2_string_to_sign(acl, "D") ==
        "GET\nMD5==\n\nD\nx-amz-meta-a:one,again\nx-amz-meta-b:two\n/bucket/a%20key?acl&versionId=v1");
  const auto bucket_request = request("PUT", "/bucket?acl", {{"host", "s3.amazonaws.com"}});
  CHECK(sigv2_string_to_sign(bucket_request, "D") == "PUT\n\n\nD\n/bucket?acl");
  CHECK(sigv2_string_to_sign(bucket_request, "D", true) == "PUT\n\n\nD\n/bucket/?acl");

  const auto signed_get = [&](const std::string& key, std::time_t at_time, const std::string& secret) {
    NameValues headers = {{"host", "s3.amazonaws.com"}, {"date", "Tue, 27 Mar 2007 21:00:02 GMT"}};
    const auto plain = request("GET", "/bucket/obj", headers);
    headers.emplace_back("authorization",
                         "AWS " + key + ":" + sigv2_signature(secret, sigv2_string_to_sign(plain, plain.header("date"))));
    return error_code([&] { authenticate(request("GET", "/bucket/obj", headers), kUsers, at_time); });
  };
  CHECK(signed_get("AKIAIOSFODNN7EXAMPLE", kMarch27, kUsers[0].secret_key) == "");
  CHECK(signed_get("AKIAIOSFODNN7EXAMPLE", kMarch27 + 16 * 60, kUsers[0].secret_key) == "RequestTimeTooSkewed");
  CHECK(signed_get("AKIAIOSFODNN7EXAMPLE", kMarch27 - 16 * 60, kUsers[0].secret_key) == "RequestTimeTooSkewed");
  CHECK(signed_get("AKIAIOSFODNN7EXAMPLE", kMarch27, "wrong") == "SignatureDoesNotMatch");
  CHECK(signed_get("AKIDUNKNOWN", kMarch27, kUsers[0].secret_key) == "InvalidAccessKeyId");
  // V2 not enabled for the user: AWS's answer where V2 is not supported, even when correctly signed.
  CHECK(signed_get("AKIDV4ONLY", kMarch27, kUsers[1].secret_key) == "InvalidRequest");

  CHECK(error_code([&] { authenticate(request("GET", "/bkt/o", {{"host", "h"}, {"authorization", "AWS nocolon"}}),
                                      kUsers, kMarch27); }) == "InvalidArgument");
  CHECK(error_code([&] {
          authenticate(request("GET", "/bkt/o", {{"host", "h"}, {"authorization", "AWS AKIAIOSFODNN7EXAMPLE:x"}}), kUsers,
                       kMarch27);
        }) == "AccessDenied");  // no date at all
  CHECK(error_code([&] { authenticate(request("GET", "/bkt/o?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=x",
                                              {{"host", "h"}}), kUsers, kMarch27); }) == "AccessDenied");
}

TEST_CASE("http dates: RFC 1123 forms", "[gateway][sigv2]") {
  CHECK(parse_http_date("Tue, 27 Mar 2007 21:00:02 GMT") == kMarch27);
  CHECK(parse_http_date("Tue, 27 Mar 2007 21:00:02 +0000") == kMarch27);
  CHECK(parse_http_date("Tue, 27 Mar 2007 21:00:02 -0000") == kMarch27);  // Python's email.utils.formatdate()
  CHECK(parse_http_date("Tue, 27 Foo 2007 21:00:02 GMT") == -1);
  CHECK(parse_http_date("27 Mar 2007 21:00:02 GMT") == -1);
  CHECK(parse_http_date("Tue, 27 Mar 2007 21:00:02 +0200") == -1);
  CHECK(parse_http_date("") == -1);
}
