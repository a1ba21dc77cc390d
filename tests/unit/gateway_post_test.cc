// Browser POST uploads: the multipart/form-data reader (fed in every split,
// delimiter-like bytes in the file, fields after the file, truncation, the
// fields' size limit) and the POST policy document (conditions, case,
// exempt fields, expiry, content-length-range, malformed documents), and
// the V2 and V4 form signatures.
#include <catch2/catch.hpp>

#include "gateway/form_data.h"
#include "gateway/post_policy.h"
#include "gateway/s3_error.h"
#include "gateway/sigv2_verify.h"
#include "gateway/sigv4_verify.h"
#include "targets/s3/sigv4.h"
#include "tests/unit/s3_error_code.h"
#include "util/bytes.h"

using namespace keel::gateway;
using keel::ByteView;
using keel::test::error_code;

namespace {

struct Read {
  NameValues fields;
  FormFile file;
  std::string data;
  int files = 0;
};

// Feeds `body` in pieces of `piece` bytes (0: whole) and finishes.
Read read_form(const std::string& body, size_t piece = 0, size_t max_fields = 1 << 16) {
  Read out;
  FormDataReader reader(
      "XyZ",
      [&](const NameValues& fields, const FormFile& file) {
        out.fields = fields;
        out.file = file;
        ++out.files;
      },
      [&](ByteView data) { out.data.append(keel::as_chars(data)); }, max_fields);
  if (piece == 0) piece = body.size() + 1;
  for (size_t at = 0; at < body.size(); at += piece) {
    reader.feed(keel::as_bytes(std::string_view(body).substr(at, piece)));
  }
  reader.finish();
  return out;
}

std::string part(const std::string& name, const std::string& value) {
  return "--XyZ\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n";
}

// base64 of a policy document.
std::string policy(const std::string& json) { return keel::to_base64(keel::as_bytes(json)); }

constexpr std::time_t kNow = 1795000000;  // 2026-11-18
const std::string kLater = "2026-12-01T00:00:00Z";

}  // namespace

TEST_CASE("form data: fields, then the file streamed whole in any split", "[gateway][post]") {
  // Every prefix of the delimiter "\r\n--XyZ" but the whole, so that pieces split them anywhere.
  std::string file;
  for (int i = 0; i < 20; ++i) file += "ab\r\n--Xy" + std::string(i % 3, '-') + "\r\n--X\r\r\n-\r";
  const std::string body = "preamble\r\n" + part("KeY", "a/${filename}") + part("x-amz-meta-One", "v 1") +
                           "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"my \\\"f\\\".txt\"\r\n"
                           "Content-Type: image/png\r\n\r\n" +
                           file + "\r\n" + part("after", "dropped") + "--XyZ--\r\n";
  for (const size_t piece : {size_t(0), size_t(1), size_t(2), size_t(5), size_t(7), size_t(64)}) {
    const Read read = read_form(body, piece);
    CAPTURE(piece);
    CHECK(read.files == 1);
    CHECK(read.fields == NameValues{{"key", "a/${filename}"}, {"x-amz-meta-one", "v 1"}});
    CHECK(read.file.filename == "my \"f\".txt");
    CHECK(read.file.content_type == "image/png");
    CHECK(read.data == file);
  }
}

TEST_CASE("form data: refusals", "[gateway][post]") {
  // The body opening with the delimiter (no preamble) is read too, and an empty file.
  CHECK(read_form(part("key", "k") + "--XyZ\r\nContent-Disposition: form-data; name=file\r\n\r\n\r\n--XyZ--").data.empty());
  CHECK(error_code([] { read_form(part("key", "k") + "--XyZ--\r\n"); }) == "IncorrectNumberOfFilesInPostRequest");
  CHECK(error_code([] { read_form(part("key", "k") + "--XyZ"); }) == "IncorrectNumberOfFilesInPostRequest");
  CHECK(error_code([] { read_form(part("key", "k")); }) == "MalformedPOSTRequest");  // ended inside the field
  CHECK(error_code([] { read_form(part("key", "k") + "--XyZ\r\nContent-Disposition: form-data; name=file\r\n\r\nab"); }) ==
        "MalformedPOSTRequest");
  CHECK(error_code([] { read_form("--XyZ\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nunterminated"); }) ==
        "MalformedPOSTRequest");
  CHECK(error_code([] { read_form("--XyZ\r\nContent-Disposition: attachment; name=\"key\"\r\n\r\nv\r\n--XyZ--"); }) ==
        "MalformedPOSTRequest");
  CHECK(error_code([] { read_form("--XyZ\r\nContent-Type: text/plain\r\n\r\nv\r\n--XyZ--"); }) == "MalformedPOSTRequest");
  // The fields before the file have a size limit, checked before they are all in.
  CHECK(error_code([] { read_form(part("policy", std::string(200, 'p')), 7, 100); }) ==
        "MaxPostPreDataLengthExceededError");
  CHECK(error_code([] { read_form(part("a", std::string(60, 'p')) + part("b", std::string(60, 'p')), 0, 100); }) ==
        "MaxPostPreDataLengthExceededError");
}

TEST_CASE("form data: the boundary of the Content-Type", "[gateway][post]") {
  CHECK(form_boundary("multipart/form-data; boundary=abc") == "abc");
  CHECK(form_boundary("Multipart/Form-Data; charset=utf-8; boundary=\"a b;c\"") == "a b;c");
  CHECK(error_code([] { form_boundary("application/x-www-form-urlencoded"); }) == "PreconditionFailed");
  CHECK(error_code([] { form_boundary(""); }) == "PreconditionFailed");
  CHECK(error_code([] { form_boundary("multipart/form-data"); }) == "MalformedPOSTRequest");
  CHECK(error_code([] { form_boundary("multipart/form-data; boundary=" + std::string(71, 'b')); }) ==
        "MalformedPOSTRequest");
}

TEST_CASE("post policy: conditions, case, exempt fields, expiry and sizes", "[gateway][post]") {
  const auto p = PostPolicy::parse(policy(
      R"({"expiration": ")" + kLater + R"(", "conditions": [{"bUcKeT": "b"}, ["StArTs-WiTh", "$KeY", "up/"],
          ["eq", "$acl", "private"], ["starts-with", "$x-amz-meta-tag", ""], ["content-length-range", 2, 10]]})"));
  const NameValues fields = {{"bucket", "b"}, {"key", "up/a"}, {"acl", "private"}, {"policy", "..."},
                             {"awsaccesskeyid", "K"}, {"signature", "S"}, {"x-ignore-me", "1"}, {"x-amz-meta-tag", "t"}};
  CHECK_NOTHROW(p.check(fields, kNow));
  CHECK(p.expiration() == 1796083200);
  // Expired (a second after), a failed prefix, a failed match, a field the policy does not name.
  CHECK(error_code([&] { p.check(fields, 1796083201); }) == "AccessDenied");
  auto changed = [&](const std::string& name, const std::string& value) {
    NameValues out = fields;
    bool found = false;
    for (auto& [n, v] : out) {
      if (n == name) v = value, found = true;
    }
    if (!found) out.emplace_back(name, value);
    return out;
  };
  CHECK(error_code([&] { p.check(changed("key", "down/a"), kNow); }) == "AccessDenied");
  CHECK(error_code([&] { p.check(changed("acl", "public-read"), kNow); }) == "AccessDenied");
  CHECK(error_code([&] { p.check(changed("bucket", "other"), kNow); }) == "AccessDenied");
  CHECK(error_code([&] { p.check(changed("content-type", "text/plain"), kNow); }) == "AccessDenied");
  // A condition on a field the form lacks compares with "".
  NameValues without_acl = fields;
  std::erase_if(without_acl, [](const auto& f) { return f.first == "acl"; });
  CHECK(error_code([&] { p.check(without_acl, kNow); }) == "AccessDenied");
  CHECK(error_code([&] { p.check_size(1); }) == "EntityTooSmall");
  CHECK_NOTHROW(p.check_size(2));
  CHECK_NOTHROW(p.check_size(10));
  CHECK(error_code([&] { p.check_size(11); }) == "EntityTooLarge");
  CHECK(p.max_size() == 10);
  CHECK(PostPolicy::parse(policy(R"({"expiration": "2026-12-01T00:00:00.000Z", "conditions": []})")).max_size() ==
        UINT64_MAX);
}

TEST_CASE("post policy: malformed documents are InvalidPolicyDocument", "[gateway][post]") {
  for (const std::string json : {
           R"({"conditions": [{"bucket": "b"}]})",                                    // no expiration
           R"({"EXPIRATION": "2026-12-01T00:00:00Z", "conditions": []})",            // element names are case-sensitive
           R"({"expiration": "2026-12-01T00:00:00Z", "CONDITIONS": []})",
           R"({"expiration": "2026-12-01 00:00:00.5+00:00", "conditions": []})",     // not ISO 8601 as S3 takes it
           R"({"expiration": "2026-13-01T00:00:00Z", "conditions": []})",
           R"({"expiration": "2026-12-01T00:00:00Z"})",                              // no conditions
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [{}]})",          // an empty condition
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [{"a": "1", "b": "2"}]})",
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [["content-length-range", 0]]})",
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [["content-length-range", -1, 0]]})",
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [["content-length-range", 5, 1]]})",
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [["between", "$key", "a"]]})",
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [["eq", "key", "a"]]})",  // no '$'
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [["eq", "$key"]]})",
           R"({"expiration": "2026-12-01T00:00:00Z", "conditions": [)",               // not JSON
       }) {
    CAPTURE(json);
    CHECK(error_code([&] { PostPolicy::parse(policy(json)); }) == "InvalidPolicyDocument");
  }
  CHECK(error_code([] { PostPolicy::parse("not base64!"); }) == "InvalidPolicyDocument");
}

TEST_CASE("post policy: V2 and V4 form signatures", "[gateway][post]") {
  const std::vector<User> users = {{"v2", "AKIDV2", "secret-v2", true}, {"v4", "AKIDV4", "secret-v4", false}};
  const std::string doc = policy(R"({"expiration": "2026-12-01T00:00:00Z", "conditions": []})");
  CHECK(verify_post_form_v2("AKIDV2", doc, sigv2_signature("secret-v2", doc), users).name == "v2");
  CHECK(error_code([&] { verify_post_form_v2("AKIDV2", doc, sigv2_signature("other", doc), users); }) ==
        "SignatureDoesNotMatch");
  // The user's signature_v2 switch, as for header and query V2.
  CHECK(error_code([&] { verify_post_form_v2("AKIDV4", doc, sigv2_signature("secret-v4", doc), users); }) ==
        "InvalidRequest");
  CHECK(error_code([&] { verify_post_form_v2("NOBODY", doc, "x", users); }) == "InvalidAccessKeyId");

  namespace sigv4 = keel::targets::s3;
  const std::string credential = "AKIDV4/20261127/us-east-1/s3/aws4_request";
  const auto key = sigv4::signing_key("secret-v4", "20261127", "us-east-1", "s3");
  CHECK(verify_post_form_v4(credential, doc, sigv4::signature(key, doc), users).name == "v4");
  CHECK(error_code([&] { verify_post_form_v4(credential, doc + "x", sigv4::signature(key, doc), users); }) ==
        "SignatureDoesNotMatch");
  CHECK(error_code([&] { verify_post_form_v4("AKIDV4/2026/us-east-1/s3", doc, "x", users); }) == "InvalidArgument");
  CHECK(error_code([&] { verify_post_form_v4("NOBODY/20261127/us-east-1/s3/aws4_request", doc, "x", users); }) ==
        "InvalidAccessKeyId");
}

TEST_CASE("post object: routing, path-style and virtual-hosted", "[gateway][post]") {
  const std::vector<std::string> domains = {"s3.example.test"};
  const auto route_of = [&](const std::string& target, const std::string& host) {
    return route(parse_request("POST", target, {{"host", host}}, domains));
  };
  CHECK(route_of("/bucket", "s3.example.test") == Operation::kPostObject);
  CHECK(route_of("/", "bucket.s3.example.test") == Operation::kPostObject);
  CHECK(route_of("/bucket?delete", "s3.example.test") == Operation::kDeleteObjects);
  CHECK(error_code([&] { route_of("/bucket?uploads", "s3.example.test"); }) == "MethodNotAllowed");
  CHECK(takes_body(Operation::kPostObject));
  CHECK(operation_name(Operation::kPostObject) == "PostObject");
}
