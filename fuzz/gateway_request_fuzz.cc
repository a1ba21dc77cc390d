// libFuzzer target: malformed requests through what the gateway parses
// before it trusts anything: request parsing and routing, SigV4 verification,
// the aws-chunked decoder (signed and unsigned) and the payload checks; a
// multipart/form-data body through the POST form reader (split where the
// body's first byte says) and its policy field through the POST policy.
// Input: an HTTP/1.1-like head ("METHOD target\nname: value\n...\n\n"),
// then the body. Any S3Error is an expected answer; anything else (a crash,
// another exception, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/aws_chunked.h"
#include "gateway/form_data.h"
#include "gateway/post_policy.h"
#include "gateway/payload_checks.h"
#include "gateway/request.h"
#include "gateway/s3_error.h"
#include "gateway/sigv4_verify.h"
#include "targets/s3/sigv4.h"

namespace {

using namespace keel;
using namespace keel::gateway;

const std::vector<User> kUsers = {{"fuzz", "AKIDFUZZ", "fuzz-secret"}};
constexpr std::time_t kNow = 1700000000;

ChunkSigning fixed_signing() {
  ChunkSigning s;
  s.key = targets::s3::signing_key("fuzz-secret", "20231114", "us-east-1", "s3");
  s.amz_date = "20231114T221320Z";
  s.scope = targets::s3::credential_scope("20231114", "us-east-1");
  s.seed_signature = std::string(64, '0');
  return s;
}

void exercise_form(const S3Request& request, std::string_view body) {
  try {
    FormDataReader reader(
        form_boundary(request.header("content-type")),
        [](const NameValues& fields, const FormFile&) {
          for (const auto& [name, value] : fields) {
            if (name == "policy") PostPolicy::parse(value).check(fields, kNow);
          }
        },
        [](ByteView) {}, 4096);
    const size_t split = body.empty() ? 0 : static_cast<uint8_t>(body[0]) % body.size();
    reader.feed(as_bytes(body.substr(0, split)));
    reader.feed(as_bytes(body.substr(split)));
    reader.finish();
  } catch (const S3Error&) {
  }
}

void exercise(std::string_view input) {
  const size_t head_end = input.find("\n\n");
  const std::string_view head = input.substr(0, head_end);
  const std::string_view body = head_end == std::string_view::npos ? std::string_view() : input.substr(head_end + 2);
  const size_t line_end = head.find('\n');
  const std::string_view request_line = head.substr(0, line_end);
  const size_t space = request_line.find(' ');
  if (space == std::string_view::npos) return;
  NameValues headers;
  std::string_view rest = line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 1);
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) headers.emplace_back(line.substr(0, colon), line.substr(colon + 1));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }

  std::optional<S3Request> request;
  try {
    request = parse_request(std::string(request_line.substr(0, space)), request_line.substr(space + 1), headers,
                            {"s3.fuzz.test"});
    route(*request);
  } catch (const S3Error&) {
  }
  Authentication auth;
  if (request) {
    try {
      auth = authenticate(*request, kUsers, kNow);
    } catch (const S3Error&) {
    }
  }
  if (request) exercise_form(*request, body);
  for (int mode = 0; mode < 3; ++mode) {
    try {
      std::optional<PayloadChecks> checks;
      if (request) checks.emplace(*request, auth);
      AwsChunkedDecoder decoder(mode == 0 ? std::nullopt : std::optional<ChunkSigning>(fixed_signing()), mode != 1,
                                [&](ByteView data) {
                                  if (checks) checks->update(data);
                                });
      decoder.feed(as_bytes(body));
      decoder.finish();
      if (checks) checks->verify(decoder.trailers());
    } catch (const S3Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  exercise(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
