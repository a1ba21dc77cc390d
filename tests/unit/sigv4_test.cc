#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "targets/s3/credentials.h"
#include "targets/s3/sigv4.h"
#include "util/error.h"
#include "util/id.h"

using namespace keel;
using namespace keel::targets::s3;

namespace {

// The worked examples in AWS's S3 API reference ("Signature Calculations for
// the Authorization Header: Transferring Payload in a Single Chunk" and
// "Authenticating Requests: Using Query Parameters") share these inputs.
const Credentials kExampleCredentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
const std::string kExampleRegion = "us-east-1";
const std::string kExampleHost = "examplebucket.s3.amazonaws.com";
constexpr std::time_t kExampleTime = 1369353600;  // 2013-05-24T00:00:00Z
const std::string kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const std::string kExampleScope = "20130524/us-east-1/s3/aws4_request";

std::string header(const NameValues& headers, const std::string& name) {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  FAIL("no header " << name);
  return "";
}

std::string authorization(const std::string& signed_headers, const std::string& signature) {
  return "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/" + kExampleScope + ", SignedHeaders=" + signed_headers +
         ", Signature=" + signature;
}

// The last line of the string to sign: the hash of the canonical request.
std::string canonical_hash(const SigningRequest& request, const std::vector<std::string>& signed_names) {
  const std::string to_sign =
      string_to_sign("20130524T000000Z", kExampleScope, canonical_request(request, signed_names));
  return to_sign.substr(to_sign.rfind('\n') + 1);
}

ErrorKind failure_of(const std::function<void()>& fn, const std::string& expected_in_message = "") {
  try {
    fn();
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(expected_in_message) != std::string::npos);
    return e.kind();
  }
  FAIL("no error thrown");
  return ErrorKind::kFailure;
}

// What a verifying server does: recompute the signature over the headers the
// Authorization header names, from the received request.
bool verifies(const SigningRequest& received, const Credentials& credentials) {
  std::string auth, amz_date;
  for (const auto& [n, v] : received.headers) {
    if (n == "authorization") auth = v;
    if (n == "x-amz-date") amz_date = v;
  }
  const auto field = [&](const std::string& key) {
    const size_t start = auth.find(key + "=") + key.size() + 1;
    return auth.substr(start, auth.find(',', start) - start);
  };
  const std::string credential = field("Credential");
  const std::string scope = credential.substr(credential.find('/') + 1);
  std::vector<std::string> names;
  for (std::string rest = field("SignedHeaders");;) {
    const size_t semicolon = rest.find(';');
    names.push_back(rest.substr(0, semicolon));
    if (semicolon == std::string::npos) break;
    rest = rest.substr(semicolon + 1);
  }
  SigningRequest without_auth = received;
  std::erase_if(without_auth.headers, [](const auto& h) { return h.first == "authorization"; });
  const std::string date = scope.substr(0, 8);
  const std::string region = scope.substr(9, scope.find('/', 9) - 9);
  const std::string expected =
      signature(signing_key(credentials.secret_access_key, date, region, "s3"),
                string_to_sign(amz_date, scope, canonical_request(without_auth, names)));
  return field("Signature") == expected;
}

}  // namespace

TEST_CASE("sigv4: AWS example GET Object with a Range header", "[sigv4]") {
  SigningRequest request{"GET", kExampleHost, "/test.txt", {}, {{"Range", "bytes=0-9"}}, kEmptySha256};
  const NameValues added = sign_request(request, kExampleCredentials, kExampleRegion, kExampleTime);

  CHECK(header(added, "authorization") ==
        authorization("host;range;x-amz-content-sha256;x-amz-date",
                      "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"));
  CHECK(header(added, "x-amz-date") == "20130524T000000Z");
  CHECK(header(added, "x-amz-content-sha256") == kEmptySha256);
  CHECK(added.size() == 3);  // no session token, no x-amz-security-token

  // The intermediate steps as the AWS page prints them.
  request.headers.insert(request.headers.end(), {{"x-amz-content-sha256", kEmptySha256},
                                                 {"x-amz-date", "20130524T000000Z"}});
  const std::vector<std::string> names{"host", "range", "x-amz-content-sha256", "x-amz-date"};
  CHECK(canonical_request(request, names) ==
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:" + kEmptySha256 + "\nx-amz-date:20130524T000000Z\n\n"
        "host;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha256);
  CHECK(string_to_sign("20130524T000000Z", kExampleScope, canonical_request(request, names)) ==
        "AWS4-HMAC-SHA256\n20130524T000000Z\n" + kExampleScope +
            "\n7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
}

TEST_CASE("sigv4: AWS example PUT Object with a '$' in the key", "[sigv4]") {
  const std::string body = "Welcome to Amazon S3.";
  const std::string payload_hash = sha256_hex(as_bytes(body));
  REQUIRE(payload_hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SigningRequest request{"PUT", kExampleHost, "/test$file.text", {},
                         {{"Date", "Fri, 24 May 2013 00:00:00 GMT"}, {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                         payload_hash};
  const NameValues added = sign_request(request, kExampleCredentials, kExampleRegion, kExampleTime);

  CHECK(header(added, "authorization") ==
        authorization("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
                      "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"));
  CHECK(encode_path(request.path) == "/test%24file.text");
  request.headers.insert(request.headers.end(), added.begin() + 1, added.end());
  CHECK(canonical_hash(request, {"date", "host", "x-amz-content-sha256", "x-amz-date", "x-amz-storage-class"}) ==
        "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
}

TEST_CASE("sigv4: AWS example GET Bucket Lifecycle (a query parameter without a value)", "[sigv4]") {
  SigningRequest request{"GET", kExampleHost, "/", {{"lifecycle", ""}}, {}, kEmptySha256};
  const NameValues added = sign_request(request, kExampleCredentials, kExampleRegion, kExampleTime);

  CHECK(header(added, "authorization") ==
        authorization("host;x-amz-content-sha256;x-amz-date",
                      "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"));
  CHECK(canonical_query_string(request.query) == "lifecycle=");
  request.headers.insert(request.headers.end(), added.begin() + 1, added.end());
  CHECK(canonical_hash(request, {"host", "x-amz-content-sha256", "x-amz-date"}) ==
        "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca");
}

TEST_CASE("sigv4: AWS example Get Bucket (List Objects) with max-keys and prefix", "[sigv4]") {
  // Given out of order: the canonical query string sorts them.
  SigningRequest request{"GET", kExampleHost, "/", {{"prefix", "J"}, {"max-keys", "2"}}, {}, kEmptySha256};
  const NameValues added = sign_request(request, kExampleCredentials, kExampleRegion, kExampleTime);

  CHECK(header(added, "authorization") ==
        authorization("host;x-amz-content-sha256;x-amz-date",
                      "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"));
  CHECK(canonical_query_string(request.query) == "max-keys=2&prefix=J");
  request.headers.insert(request.headers.end(), added.begin() + 1, added.end());
  CHECK(canonical_hash(request, {"host", "x-amz-content-sha256", "x-amz-date"}) ==
        "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7");
}

TEST_CASE("sigv4: AWS example presigned GET Object URL", "[sigv4]") {
  const SigningRequest request{"GET", kExampleHost, "/test.txt", {}, {}, ""};
  CHECK(presign(request, kExampleCredentials, kExampleRegion, kExampleTime, 86400) ==
        "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");

  // A verifier rebuilds the request from the URL without X-Amz-Signature.
  SigningRequest received = request;
  received.query = {{"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
                    {"X-Amz-Credential", "AKIAIOSFODNN7EXAMPLE/" + kExampleScope},
                    {"X-Amz-Date", "20130524T000000Z"},
                    {"X-Amz-Expires", "86400"},
                    {"X-Amz-SignedHeaders", "host"}};
  received.payload_hash = kUnsignedPayload;
  CHECK(canonical_hash(received, {"host"}) == "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04");
}

TEST_CASE("sigv4: presigned URLs carry the session token and refuse bad lifetimes", "[sigv4]") {
  const Credentials temporary{"ASIAEXAMPLE", "secret", "token/with+chars="};
  const SigningRequest request{"PUT", "127.0.0.1:7480", "/bucket/packs/a b", {{"partNumber", "1"}}, {}, ""};
  const std::string url = presign(request, temporary, "eu-west-1", kExampleTime, 60);
  CHECK(url.starts_with("/bucket/packs/a%20b?X-Amz-Algorithm=AWS4-HMAC-SHA256&"));
  CHECK(url.find("&X-Amz-Security-Token=token%2Fwith%2Bchars%3D&") != std::string::npos);
  CHECK(url.find("&partNumber=1&") != std::string::npos);

  CHECK(failure_of([&] { presign(request, temporary, "eu-west-1", kExampleTime, 0); }, "lifetime") ==
        ErrorKind::kUsage);
  CHECK(failure_of([&] { presign(request, temporary, "eu-west-1", kExampleTime, 604801); }, "lifetime") ==
        ErrorKind::kUsage);
  CHECK_NOTHROW(presign(request, temporary, "eu-west-1", kExampleTime, 604800));
  SigningRequest with_signature = request;
  with_signature.query.emplace_back("X-Amz-Signature", "0");
  CHECK(failure_of([&] { presign(with_signature, temporary, "eu-west-1", kExampleTime, 60); }, "X-Amz-Signature") ==
        ErrorKind::kUsage);
}

TEST_CASE("sigv4: signed requests verify with the shared canonicalisation", "[sigv4]") {
  const Credentials temporary{"ASIAEXAMPLE", "secret", "session-token"};
  SigningRequest request{"PUT",
                         "127.0.0.1:7480",
                         "/bucket/packs/ab/ab12",
                         {{"uploadId", "2~x y"}, {"partNumber", "3"}},
                         {{"Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg=="}, {"x-amz-checksum-crc32c", "AAAAAA=="}},
                         kEmptySha256};
  const NameValues added = sign_request(request, temporary, "us-west-2", 1795428900);
  CHECK(header(added, "x-amz-security-token") == "session-token");
  CHECK(header(added, "x-amz-date") == "20261123T101500Z");
  CHECK(header(added, "authorization")
            .find("Credential=ASIAEXAMPLE/20261123/us-west-2/s3/aws4_request, SignedHeaders=content-md5;host;"
                  "x-amz-checksum-crc32c;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=") !=
        std::string::npos);

  SigningRequest received = request;
  received.headers.insert(received.headers.end(), added.begin(), added.end());
  CHECK(verifies(received, temporary));

  SigningRequest tampered = received;
  tampered.query[0].second = "2~x  y";
  CHECK_FALSE(verifies(tampered, temporary));
  tampered = received;
  tampered.headers[0].second = "AAAAAAAAAAAAAAAAAAAAAA==";
  CHECK_FALSE(verifies(tampered, temporary));
  CHECK_FALSE(verifies(received, {"ASIAEXAMPLE", "other secret", ""}));
}

TEST_CASE("sigv4: URI encoding keeps only unreserved characters", "[sigv4]") {
  CHECK(uri_encode("AZaz09-_.~", true) == "AZaz09-_.~");
  CHECK(uri_encode("a b+c=d&e", true) == "a%20b%2Bc%3Dd%26e");
  CHECK(uri_encode("a/b", true) == "a%2Fb");
  CHECK(uri_encode("a/b", false) == "a/b");
  CHECK(uri_encode("ü日", true) == "%C3%BC%E6%97%A5");  // UTF-8 bytes, upper-case hex
  CHECK(uri_encode(std::string_view("\0\x7f\xff", 3), true) == "%00%7F%FF");
  CHECK(uri_encode("", true).empty());

  // A '%' in a raw path is data: encoded once, never taken as an escape.
  CHECK(encode_path("/bucket/a%20b") == "/bucket/a%2520b");
  CHECK(encode_path("/bucket/a b/c+d=e~f") == "/bucket/a%20b/c%2Bd%3De~f");
  CHECK(encode_path("/bucket/ünï/日本") == "/bucket/%C3%BCn%C3%AF/%E6%97%A5%E6%9C%AC");
  // S3 does not normalise paths: empty and dot segments are part of the key.
  CHECK(encode_path("/bucket//./x/../y/") == "/bucket//./x/../y/");
  CHECK(encode_path("") == "/");
  CHECK(failure_of([] { encode_path("bucket/key"); }, "bucket/key") == ErrorKind::kUsage);
}

TEST_CASE("sigv4: canonical query strings sort encoded names, then values", "[sigv4]") {
  CHECK(canonical_query_string({}).empty());
  CHECK(canonical_query_string({{"uploads", ""}}) == "uploads=");
  CHECK(canonical_query_string({{"b", "2"}, {"a", "x y"}, {"a", "1"}}) == "a=1&a=x%20y&b=2");
  // Sorted by bytes of the encoded form: '%' < '-' < 'A' < 'a'.
  CHECK(canonical_query_string({{"a", ""}, {"A", ""}, {"a-b", ""}, {"a b", ""}}) == "A=&a=&a%20b=&a-b=");
  CHECK(canonical_query_string({{"prefix", "dir/sub dir/"}, {"list-type", "2"}}) ==
        "list-type=2&prefix=dir%2Fsub%20dir%2F");
  CHECK(failure_of([] { canonical_query_string({{"", "x"}}); }, "empty name") == ErrorKind::kUsage);
}

TEST_CASE("sigv4: header canonicalisation trims, collapses, lower-cases and joins", "[sigv4]") {
  const SigningRequest request{"GET",
                               " example.com:9000 ",
                               "/b/k",
                               {},
                               {{"X-Amz-Meta-Tag", "  one   two\t\tthree  "},
                                {"content-type", "text/plain"},
                                {"x-amz-meta-tag", "four"},
                                {"X-Amz-Meta-Empty", "   "}},
                               kEmptySha256};
  CHECK(canonical_request(request, {"content-type", "host", "x-amz-meta-empty", "x-amz-meta-tag"}) ==
        "GET\n/b/k\n\ncontent-type:text/plain\nhost:example.com:9000\nx-amz-meta-empty:\n"
        "x-amz-meta-tag:one two three,four\n\n"
        "content-type;host;x-amz-meta-empty;x-amz-meta-tag\n" + kEmptySha256);
  // Headers left out of the signed list do not appear.
  CHECK(canonical_request(request, {"host"}) == "GET\n/b/k\n\nhost:example.com:9000\n\nhost\n" + kEmptySha256);

  // The signer signs every header it is given, duplicates joined once.
  const NameValues added = sign_request(request, kExampleCredentials, kExampleRegion, kExampleTime);
  CHECK(header(added, "authorization").find("SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
                                            "x-amz-meta-empty;x-amz-meta-tag,") != std::string::npos);
}

TEST_CASE("sigv4: malformed requests are refused", "[sigv4]") {
  const SigningRequest good{"GET", kExampleHost, "/b/k", {}, {{"range", "bytes=0-9"}}, kEmptySha256};
  const auto sign = [](const SigningRequest& r, const Credentials& c = kExampleCredentials,
                       const std::string& region = kExampleRegion) {
    sign_request(r, c, region, kExampleTime);
  };
  REQUIRE_NOTHROW(sign(good));

  SigningRequest r = good;
  r.headers.emplace_back("X-Amz-Date", "20130524T000000Z");
  CHECK(failure_of([&] { sign(r); }, "x-amz-date") == ErrorKind::kUsage);
  r = good;
  r.headers.emplace_back("Host", kExampleHost);
  CHECK(failure_of([&] { sign(r); }, "host") == ErrorKind::kUsage);
  r = good;
  r.headers.emplace_back("x-amz-meta-evil", "a\r\nx-amz-acl: public-read");
  CHECK(failure_of([&] { sign(r); }, "x-amz-meta-evil") == ErrorKind::kUsage);
  r = good;
  r.headers.emplace_back("bad name", "x");
  CHECK(failure_of([&] { sign(r); }, "bad name") == ErrorKind::kUsage);
  r = good;
  r.payload_hash = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
  CHECK(failure_of([&] { sign(r); }, "payload hash") == ErrorKind::kUsage);
  r = good;
  r.payload_hash = "";
  CHECK(failure_of([&] { sign(r); }, "payload hash") == ErrorKind::kUsage);
  r = good;
  r.path = "b/k";
  CHECK(failure_of([&] { sign(r); }, "b/k") == ErrorKind::kUsage);

  CHECK(failure_of([&] { sign(good, {"AKID", "", ""}); }, "secret") == ErrorKind::kUsage);
  CHECK(failure_of([&] { sign(good, {"AK/ID", "secret", ""}); }, "AK/ID") == ErrorKind::kUsage);
  CHECK(failure_of([&] { sign(good, kExampleCredentials, ""); }, "region") == ErrorKind::kUsage);

  // The verifier's side: SignedHeaders must be sorted, lower case and present.
  CHECK(failure_of([&] { canonical_request(good, {"range", "host"}); }, "sorted") == ErrorKind::kUsage);
  CHECK(failure_of([&] { canonical_request(good, {"Host"}); }, "lower case") == ErrorKind::kUsage);
  CHECK(failure_of([&] { canonical_request(good, {"host", "host"}); }, "unique") == ErrorKind::kUsage);
  CHECK(failure_of([&] { canonical_request(good, {"host", "x-amz-date"}); }, "x-amz-date") == ErrorKind::kUsage);
  CHECK(failure_of([&] { canonical_request(good, {}); }, "host") == ErrorKind::kUsage);
}

TEST_CASE("sigv4: SHA-256 and the signing key match their references", "[sigv4]") {
  CHECK(sha256_hex({}) == kEmptySha256);
  CHECK(sha256_hex(as_bytes("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // AWS's SigV4 general reference example: secret wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY,
  // 20120215, us-east-1, iam.
  const auto key = signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam");
  CHECK(to_hex(key) == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

// ---------------------------------------------------------------------------
// Credential resolution

namespace {

// Clears the variables resolve_credentials reads, points HOME at a scratch
// directory, and puts everything back afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment() {
    for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                             "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                             "HOME"}) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      ::unsetenv(name);
    }
    std::filesystem::create_directories(home_ / ".aws");
    set("HOME", home_.string());
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    std::filesystem::remove_all(home_);
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

  void set(const std::string& name, const std::string& value) { ::setenv(name.c_str(), value.c_str(), 1); }
  void unset(const std::string& name) { ::unsetenv(name.c_str()); }

  // Writes `text` to `relative` under the scratch HOME; returns its path.
  std::string write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = home_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string home() const { return home_.string(); }

 private:
  std::filesystem::path home_ =
      std::filesystem::temp_directory_path() / ("keel-sigv4-home-" + Id::random().short_hex());
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace

TEST_CASE("credentials: flags win over the environment, the environment over the profile", "[sigv4]") {
  ScopedEnvironment env;
  const std::string credentials_file = env.write(".aws/credentials",
                                                 "[default]\naws_access_key_id = PROFILEKEY\n"
                                                 "aws_secret_access_key = profilesecret\n");
  env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
  env.set("AWS_SESSION_TOKEN", "envtoken");

  ResolvedCredentials resolved = resolve_credentials({.access_key_id = "FLAGKEY", .secret_access_key = "flagsecret"});
  CHECK(resolved.source == "flags");
  CHECK(resolved.credentials.access_key_id == "FLAGKEY");
  CHECK(resolved.credentials.secret_access_key == "flagsecret");
  CHECK(resolved.credentials.session_token.empty());  // the environment's token belongs to its keys
  CHECK(resolved.region == "us-east-1");

  resolved = resolve_credentials({});
  CHECK(resolved.source == "environment");
  CHECK(resolved.credentials.access_key_id == "ENVKEY");
  CHECK(resolved.credentials.secret_access_key == "envsecret");
  CHECK(resolved.credentials.session_token == "envtoken");

  env.unset("AWS_ACCESS_KEY_ID");
  env.unset("AWS_SECRET_ACCESS_KEY");
  env.unset("AWS_SESSION_TOKEN");
  resolved = resolve_credentials({});
  CHECK(resolved.source == "profile default (" + credentials_file + ")");
  CHECK(resolved.credentials.access_key_id == "PROFILEKEY");
  CHECK(resolved.credentials.secret_access_key == "profilesecret");
  CHECK(resolved.credentials.session_token.empty());

  // Empty variables count as unset.
  env.set("AWS_ACCESS_KEY_ID", "");
  CHECK(resolve_credentials({}).credentials.access_key_id == "PROFILEKEY");
}

TEST_CASE("credentials: a named profile from messy shared files", "[sigv4]") {
  ScopedEnvironment env;
  const std::string credentials_file = env.write(
      "elsewhere/creds.ini",
      "\xEF\xBB\xBF# written by hand\r\n"
      "[default]\r\n"
      "aws_access_key_id=DEFAULTKEY\r\n"
      "aws_secret_access_key=defaultsecret\r\n"
      "\r\n"
      "  [ dev ]  \r\n"
      "; the dev account\r\n"
      "  AWS_Access_Key_ID   =   DEVKEY   \r\n"
      "aws_secret_access_key: dev/secret+with=signs   # rotated 2026-01\r\n"
      "Aws_Session_Token = devtoken\r\n"
      "[indented]\r\n"
      "    aws_access_key_id = INDENTEDKEY\r\n"
      "    aws_secret_access_key = indentedsecret\r\n");
  env.write("elsewhere/config",
            "[default]\nregion = eu-west-1\n\n"
            "[profile   dev]\n"
            "s3 =\n"
            "    region = ap-south-1\n"
            "    addressing_style = path\n"
            "region = eu-central-1 ; Frankfurt\n"
            "output = json\n");
  env.set("AWS_SHARED_CREDENTIALS_FILE", credentials_file);
  env.set("AWS_CONFIG_FILE", "~/elsewhere/config");

  ResolvedCredentials resolved = resolve_credentials({.profile = "dev"});
  CHECK(resolved.source == "profile dev (" + credentials_file + ")");
  CHECK(resolved.credentials.access_key_id == "DEVKEY");
  CHECK(resolved.credentials.secret_access_key == "dev/secret+with=signs");
  CHECK(resolved.credentials.session_token == "devtoken");
  CHECK(resolved.region == "eu-central-1");

  // Keys indented alike are siblings, not a continuation of the first.
  resolved = resolve_credentials({.profile = "indented"});
  CHECK(resolved.credentials.secret_access_key == "indentedsecret");
  CHECK(resolved.region == "us-east-1");

  env.set("AWS_PROFILE", "dev");
  CHECK(resolve_credentials({}).credentials.access_key_id == "DEVKEY");
  env.unset("AWS_PROFILE");
  resolved = resolve_credentials({});
  CHECK(resolved.credentials.access_key_id == "DEFAULTKEY");
  CHECK(resolved.region == "eu-west-1");
}

TEST_CASE("credentials: a profile named by flag beats the environment's keys, AWS_PROFILE does not", "[sigv4]") {
  ScopedEnvironment env;
  env.write(".aws/credentials", "[work]\naws_access_key_id = WORKKEY\naws_secret_access_key = worksecret\n");
  env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env.set("AWS_SECRET_ACCESS_KEY", "envsecret");

  CHECK(resolve_credentials({.profile = "work"}).credentials.access_key_id == "WORKKEY");
  env.set("AWS_PROFILE", "work");
  CHECK(resolve_credentials({}).credentials.access_key_id == "ENVKEY");
}

TEST_CASE("credentials: keys in the config file's profile section", "[sigv4]") {
  ScopedEnvironment env;
  env.write(".aws/credentials", "[other]\naws_access_key_id = OTHER\naws_secret_access_key = other\n");
  const std::string config = env.write(".aws/config",
                                       "[profile ci]\naws_access_key_id = CIKEY\naws_secret_access_key = cisecret\n"
                                       "region = us-west-2\n");
  const ResolvedCredentials resolved = resolve_credentials({.profile = "ci"});
  CHECK(resolved.source == "profile ci (" + config + ")");
  CHECK(resolved.credentials.access_key_id == "CIKEY");
  CHECK(resolved.region == "us-west-2");
}

TEST_CASE("credentials: region from flag, AWS_REGION, AWS_DEFAULT_REGION, config, default", "[sigv4]") {
  ScopedEnvironment env;
  env.write(".aws/config", "[default]\nregion = eu-north-1\n");
  const CredentialSources keys{.access_key_id = "K", .secret_access_key = "S"};
  CHECK(resolve_credentials(keys).region == "eu-north-1");
  env.set("AWS_DEFAULT_REGION", "sa-east-1");
  CHECK(resolve_credentials(keys).region == "sa-east-1");
  env.set("AWS_REGION", "ca-central-1");
  CHECK(resolve_credentials(keys).region == "ca-central-1");
  CredentialSources with_region = keys;
  with_region.region = "default";  // Ceph RGW's zonegroup name
  CHECK(resolve_credentials(with_region).region == "default");

  env.unset("AWS_REGION");
  env.unset("AWS_DEFAULT_REGION");
  env.write(".aws/config", "[profile default]\n");
  CHECK(resolve_credentials(keys).region == "us-east-1");
}

TEST_CASE("credentials: half-given key pairs name where they came from", "[sigv4]") {
  ScopedEnvironment env;
  env.write(".aws/credentials", "[default]\naws_access_key_id = PROFILEKEY\naws_secret_access_key = s\n");

  CHECK(failure_of([] { resolve_credentials({.access_key_id = "FLAGKEY"}); }, "command-line flags") ==
        ErrorKind::kUsage);
  CHECK(failure_of([] { resolve_credentials({.session_token = "t"}); }, "session token") == ErrorKind::kUsage);

  env.set("AWS_ACCESS_KEY_ID", "ENVKEY");
  CHECK(failure_of([] { resolve_credentials({}); }, "AWS_SECRET_ACCESS_KEY") == ErrorKind::kUsage);
  env.unset("AWS_ACCESS_KEY_ID");
  env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
  CHECK(failure_of([] { resolve_credentials({}); }, "AWS_ACCESS_KEY_ID is not") == ErrorKind::kUsage);
  env.unset("AWS_SECRET_ACCESS_KEY");

  const std::string file = env.write(".aws/credentials", "[default]\naws_access_key_id = PROFILEKEY\n");
  CHECK(failure_of([] { resolve_credentials({}); }, "profile default (" + file + "): aws_access_key_id is set") ==
        ErrorKind::kUsage);
}

TEST_CASE("credentials: nothing anywhere lists the places looked at", "[sigv4]") {
  ScopedEnvironment env;
  const std::string home = env.home();
  CHECK(failure_of([] { resolve_credentials({}); }, "AWS_ACCESS_KEY_ID") == ErrorKind::kUsage);
  CHECK(failure_of([] { resolve_credentials({}); }, home + "/.aws/credentials (no such file)") == ErrorKind::kUsage);
  CHECK(failure_of([] { resolve_credentials({}); }, home + "/.aws/config (no such file)") == ErrorKind::kUsage);

  env.write(".aws/config", "[default]\nregion = eu-west-1\nrole_arn = arn:aws:iam::123456789012:role/x\n");
  CHECK(failure_of([] { resolve_credentials({}); }, "[default] has no aws_access_key_id") == ErrorKind::kUsage);

  CHECK(failure_of([] { resolve_credentials({.profile = "missing"}); }, "profile 'missing' is not defined") ==
        ErrorKind::kUsage);

  env.unset("HOME");
  CHECK(failure_of([] { resolve_credentials({}); }, "HOME not set") == ErrorKind::kUsage);
}

TEST_CASE("credentials: malformed shared files are reported by line, without their contents", "[sigv4]") {
  ScopedEnvironment env;
  const std::string file = env.write(".aws/credentials", "[default]\naws_secret_access_key SECRETVALUE\n");
  try {
    resolve_credentials({});
    FAIL("no error thrown");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kUsage);
    CHECK(std::string(e.what()).find(file + " line 2") != std::string::npos);
    CHECK(std::string(e.what()).find("SECRETVALUE") == std::string::npos);
  }
  // Keys given by flag do not need the broken file.
  CHECK(resolve_credentials({.access_key_id = "K", .secret_access_key = "S"}).source == "flags");

  env.write(".aws/credentials", "aws_access_key_id = K\n[default]\n");
  CHECK(failure_of([] { resolve_credentials({}); }, "before the first [section]") == ErrorKind::kUsage);
  env.write(".aws/credentials", "[default\n");
  CHECK(failure_of([] { resolve_credentials({}); }, "closing ']'") == ErrorKind::kUsage);
}
