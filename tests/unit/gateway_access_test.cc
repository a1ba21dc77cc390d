// ACLs and bucket policies of the gateway: canned ACLs, grant headers and
// documents, evaluation with public-access-block's IgnorePublicAcls; policy
// parsing, Allow/Deny by principal, action, resource, aws:SourceIp and
// s3:prefix; routing of the access subresources; CORS rules; which server-side
// encryption requests a bucket can honour.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "gateway/acl.h"
#include "gateway/bucket_policy.h"
#include "gateway/cors.h"
#include "gateway/encryption.h"
#include "gateway/gateway_keys.h"
#include "gateway/request.h"
#include "gateway/s3_error.h"
#include "tests/unit/s3_error_code.h"

using namespace keel::gateway;

namespace {

const std::vector<User> kUsers = {{"alice", "AKIDA", "sa"}, {"bob", "AKIDB", "sb"}, {"carol", "AKIDC", "sc"}};

using keel::test::error_code;

S3Request with_headers(NameValues headers) { return parse_request("PUT", "/bucket/key", std::move(headers), {}); }

PolicyRequest ask(std::string action, std::string resource, std::string user, std::string ip = "10.1.2.3") {
  return {std::move(action), std::move(resource), std::move(user), std::move(ip), false, "", 1'700'000'000, {}};
}

// A request whose other condition keys ("s3:x-amz-acl", ...) have the values `values` holds
// when it is evaluated (kept by reference).
PolicyRequest ask_with_values(std::string action, std::string resource, std::string user,
                              const std::map<std::string, std::string>& values) {
  PolicyRequest request = ask(std::move(action), std::move(resource), std::move(user));
  request.value_of = [&values](const std::string& key) -> std::optional<std::string> {
    const auto it = values.find(key);
    return it == values.end() ? std::nullopt : std::optional(it->second);
  };
  return request;
}

}  // namespace

TEST_CASE("acl: canned ACLs and who they let in", "[gateway][acl]") {
  const Acl priv = canned_acl("private", "alice", "alice");
  CHECK(acl_allows(priv, "alice", Permission::kWrite, false));
  CHECK_FALSE(acl_allows(priv, "bob", Permission::kRead, false));
  CHECK_FALSE(acl_allows(priv, "", Permission::kRead, false));
  CHECK_FALSE(acl_is_public(priv));

  const Acl public_read = canned_acl("public-read", "alice", "alice");
  CHECK(acl_allows(public_read, "", Permission::kRead, false));
  CHECK(acl_allows(public_read, "bob", Permission::kRead, false));
  CHECK_FALSE(acl_allows(public_read, "", Permission::kWrite, false));
  CHECK_FALSE(acl_allows(public_read, "", Permission::kRead, true));  // IgnorePublicAcls
  CHECK(acl_is_public(public_read));

  const Acl authenticated = canned_acl("authenticated-read", "alice", "alice");
  CHECK(acl_allows(authenticated, "bob", Permission::kRead, false));
  CHECK_FALSE(acl_allows(authenticated, "", Permission::kRead, false));

  CHECK(acl_allows(canned_acl("public-read-write", "alice", "alice"), "", Permission::kWrite, false));
  const Acl owner_full = canned_acl("bucket-owner-full-control", "bob", "alice");
  CHECK(acl_allows(owner_full, "alice", Permission::kWriteAcp, false));
  CHECK(acl_allows(owner_full, "bob", Permission::kReadAcp, false));
  CHECK(error_code([] { canned_acl("world-writable", "alice", "alice"); }) == "InvalidArgument");
}

TEST_CASE("acl: grant headers, documents and the stored form", "[gateway][acl]") {
  const auto requested = acl_from_headers(
      with_headers({{"x-amz-grant-read", "id=\"" + canonical_id("bob") +
                                             "\", uri=\"http://acs.amazonaws.com/groups/global/AuthenticatedUsers\""},
                    {"x-amz-grant-write-acp", "id=\"" + canonical_id("carol") + "\""}}),
      "alice", "alice", kUsers);
  REQUIRE(requested.given);
  CHECK(acl_allows(requested.acl, "bob", Permission::kRead, false));
  CHECK(acl_allows(requested.acl, "carol", Permission::kRead, false));  // authenticated users
  CHECK(acl_allows(requested.acl, "carol", Permission::kWriteAcp, false));
  CHECK_FALSE(acl_allows(requested.acl, "bob", Permission::kWriteAcp, false));
  CHECK_FALSE(acl_allows(requested.acl, "", Permission::kRead, false));

  CHECK_FALSE(acl_from_headers(with_headers({}), "alice", "alice", kUsers).given);
  CHECK(error_code([] {
          acl_from_headers(with_headers({{"x-amz-acl", "private"}, {"x-amz-grant-read", "id=\"x\""}}), "a", "a", kUsers);
        }) == "InvalidArgument");  // an unknown canonical id
  CHECK(error_code([] {
          acl_from_headers(with_headers({{"x-amz-acl", "private"}, {"x-amz-grant-read", "id=\"" + canonical_id("bob") + "\""}}),
                           "alice", "alice", kUsers);
        }) == "InvalidRequest");
  CHECK(error_code([] {
          acl_from_headers(with_headers({{"x-amz-grant-read", "emailAddress=\"a@b\""}}), "a", "a", kUsers);
        }) == "UnresolvableGrantByEmailAddress");  // users have no e-mail addresses
  CHECK(error_code([] {
          acl_from_headers(with_headers({{"x-amz-grant-read", "nickname=\"a\""}}), "a", "a", kUsers);
        }) == "InvalidArgument");
  // S3 also takes an unquoted id; a user's name stands for its canonical id.
  const auto unquoted = acl_from_headers(
      with_headers({{"x-amz-grant-read", "id=" + canonical_id("bob")}, {"x-amz-grant-write", " id = carol "}}),
      "alice", "alice", kUsers);
  CHECK(acl_allows(unquoted.acl, "bob", Permission::kRead, false));
  CHECK(acl_allows(unquoted.acl, "carol", Permission::kWrite, false));
  CHECK_FALSE(acl_allows(unquoted.acl, "carol", Permission::kRead, false));
  for (const char* malformed : {"id=", "id=\"\"", "bob", "id=\"bob"}) {
    CHECK(error_code([&] { acl_from_headers(with_headers({{"x-amz-grant-read", malformed}}), "a", "a", kUsers); }) ==
          "InvalidArgument");
  }

  // The document round-trips through its parser; so does the stored form.
  const std::string document = acl_document(requested.acl);
  CHECK(document.find("<ID>" + canonical_id("bob") + "</ID>") != std::string::npos);
  CHECK(document.find("xsi:type=\"Group\"") != std::string::npos);
  // Listed groups first, then users by name (RGW's order, which conformance suites compare).
  const Acl parsed = parse_acl_document(document, kUsers);
  CHECK(acl_document(parsed) == document);
  CHECK(parsed.owner == requested.acl.owner);
  CHECK(std::is_permutation(parsed.grants.begin(), parsed.grants.end(), requested.acl.grants.begin(),
                            requested.acl.grants.end()));
  CHECK(std::is_sorted(parsed.grants.begin(), parsed.grants.end(), [](const Grant& a, const Grant& b) {
    return std::pair(a.to == Grant::To::kUser, a.user) < std::pair(b.to == Grant::To::kUser, b.user);
  }));
  CHECK(decode_acl(encode_acl(requested.acl)) == requested.acl);
  CHECK(decode_acl(encode_acl(canned_acl("public-read-write", "bob", "bob"))) ==
        canned_acl("public-read-write", "bob", "bob"));
  CHECK(error_code([] { parse_acl_document("<Other/>", kUsers); }) == "MalformedACLError");
  CHECK(error_code([] {
          parse_acl_document("<AccessControlPolicy><Owner><ID>" + canonical_id("alice") +
                                 "</ID></Owner><AccessControlList><Grant><Grantee><ID>" + canonical_id("bob") +
                                 "</ID></Grantee><Permission>EVERYTHING</Permission></Grant></AccessControlList>"
                                 "</AccessControlPolicy>",
                             kUsers);
        }) == "MalformedACLError");
}

TEST_CASE("policy: wildcards and address blocks", "[gateway][policy]") {
  CHECK(wildcard_match("s3:get*", "s3:getobject"));
  CHECK(wildcard_match("arn:aws:s3:::b/home/*/docs/?.txt", "arn:aws:s3:::b/home/ann/docs/a.txt"));
  CHECK_FALSE(wildcard_match("arn:aws:s3:::b/home/*", "arn:aws:s3:::b/other"));
  CHECK(wildcard_match("*", ""));
  CHECK_FALSE(wildcard_match("a?", "a"));
  CHECK(address_in_block("10.1.2.3", "10.0.0.0/8"));
  CHECK_FALSE(address_in_block("11.1.2.3", "10.0.0.0/8"));
  CHECK(address_in_block("192.168.1.7", "192.168.1.7"));
  CHECK(address_in_block("2001:db8::1", "2001:db8::/32"));
  CHECK_FALSE(address_in_block("10.1.2.3", "2001:db8::/32"));
  CHECK_FALSE(address_in_block("garbage", "10.0.0.0/8"));
  CHECK(policy_action(Operation::kListObjectsV2) == "s3:ListBucket");
  CHECK(policy_action(Operation::kGetObject) == "s3:GetObject");
  CHECK(policy_action(Operation::kUploadPart) == "s3:PutObject");
}

TEST_CASE("policy: Allow and Deny by principal, action, resource and conditions", "[gateway][policy]") {
  const std::string json = R"({
    "Version": "2012-10-17",
    "Statement": [
      {"Sid": "public", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
       "Resource": "arn:aws:s3:::photos/public/*"},
      {"Effect": "Allow", "Principal": {"AWS": ["bob", "arn:aws:iam::123456789012:user/carol"]},
       "Action": ["s3:ListBucket"], "Resource": "arn:aws:s3:::photos",
       "Condition": {"StringLike": {"s3:prefix": ["home/bob/*", "shared/*"]}}},
      {"Effect": "Allow", "Principal": {"CanonicalUser": ")" + canonical_id("bob") + R"("},
       "Action": "s3:*", "Resource": "arn:aws:s3:::photos/home/bob/*"},
      {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*", "Resource": "arn:aws:s3:::photos/*",
       "Condition": {"NotIpAddress": {"aws:SourceIp": ["10.0.0.0/8", "::1"]}}}
    ]})";
  const BucketPolicy policy = BucketPolicy::parse(json, "photos", kUsers);
  CHECK(policy.is_public());
  CHECK(policy.evaluate(ask("s3:GetObject", "arn:aws:s3:::photos/public/a.jpg", "")) == PolicyEffect::kAllow);
  CHECK(policy.evaluate(ask("s3:GetObject", "arn:aws:s3:::photos/private/a.jpg", "")) == PolicyEffect::kNone);
  CHECK(policy.evaluate(ask("s3:PutObject", "arn:aws:s3:::photos/public/a.jpg", "")) == PolicyEffect::kNone);
  // Outside 10/8 everything on objects is denied, even what another statement allows.
  CHECK(policy.evaluate(ask("s3:GetObject", "arn:aws:s3:::photos/public/a.jpg", "", "192.0.2.1")) ==
        PolicyEffect::kDeny);
  CHECK(policy.evaluate(ask("s3:GetObject", "arn:aws:s3:::photos/public/a.jpg", "", "::1")) == PolicyEffect::kAllow);
  CHECK(policy.evaluate(ask("s3:DeleteObject", "arn:aws:s3:::photos/home/bob/x", "bob")) == PolicyEffect::kAllow);
  CHECK(policy.evaluate(ask("s3:DeleteObject", "arn:aws:s3:::photos/home/bob/x", "carol")) == PolicyEffect::kNone);

  PolicyRequest list = ask("s3:ListBucket", "arn:aws:s3:::photos", "carol");
  CHECK(policy.evaluate(list) == PolicyEffect::kNone);  // no prefix: StringLike does not match
  list.has_prefix = true;
  list.prefix = "shared/2024/";
  CHECK(policy.evaluate(list) == PolicyEffect::kAllow);
  list.prefix = "home/alice/";
  CHECK(policy.evaluate(list) == PolicyEffect::kNone);
  list.user = "alice";
  list.prefix = "shared/";
  CHECK(policy.evaluate(list) == PolicyEffect::kNone);

  const BucketPolicy restricted = BucketPolicy::parse(
      R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
          "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}})",
      "b", kUsers);
  CHECK_FALSE(restricted.is_public());
}

TEST_CASE("policy: conditions on headers and object tags", "[gateway][policy]") {
  const BucketPolicy policy = BucketPolicy::parse(R"({"Statement": [
      {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*",
       "Condition": {"StringLike": {"s3:x-amz-acl": "public*"}}},
      {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
       "Condition": {"StringEquals": {"s3:ExistingObjectTag/Security": "public"}}},
      {"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*",
       "Condition": {"StringLike": {"s3:x-amz-copy-source": "b/public/*"},
                     "StringEquals": {"S3:x-amz-metadata-directive": "COPY"}}}]})",
                                                  "b", kUsers);
  std::map<std::string, std::string> values;
  const auto ask_with = [&](const std::string& action, const std::string& user) {
    return policy.evaluate(ask_with_values(action, "arn:aws:s3:::b/k", user, values));
  };
  CHECK(ask_with("s3:PutObject", "carol") == PolicyEffect::kNone);
  values["s3:x-amz-acl"] = "public-read";
  CHECK(ask_with("s3:PutObject", "carol") == PolicyEffect::kDeny);
  values.clear();
  CHECK(ask_with("s3:GetObject", "") == PolicyEffect::kNone);
  values["s3:existingobjecttag/security"] = "public";  // tag keys keep their case
  CHECK(ask_with("s3:GetObject", "") == PolicyEffect::kNone);
  values["s3:existingobjecttag/Security"] = "public";
  CHECK(ask_with("s3:GetObject", "") == PolicyEffect::kAllow);
  values = {{"s3:x-amz-copy-source", "b/public/x"}};
  CHECK(ask_with("s3:PutObject", "bob") == PolicyEffect::kNone);  // both conditions must hold
  values["s3:x-amz-metadata-directive"] = "COPY";
  CHECK(ask_with("s3:PutObject", "bob") == PolicyEffect::kAllow);
  values["s3:x-amz-copy-source"] = "b/private/x";
  CHECK(ask_with("s3:PutObject", "bob") == PolicyEffect::kNone);
  CHECK(error_code([] {
          BucketPolicy::parse(R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
              "Resource": "arn:aws:s3:::b/*", "Condition": {"StringEquals": {"s3:ExistingObjectTag/": "x"}}}})",
                              "b", kUsers);
        }) == "MalformedPolicy");
}

TEST_CASE("policy: date and numeric conditions, IfExists", "[gateway][policy]") {
  // now is 2023-11-14T22:13:20Z (1700000000).
  const auto allows = [](const std::string& condition, std::optional<std::string> max_keys = std::nullopt) {
    const BucketPolicy policy = BucketPolicy::parse(
        R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
            "Condition": )" + condition + "}}",
        "b", kUsers);
    PolicyRequest request = ask("s3:ListBucket", "arn:aws:s3:::b", "bob");
    request.value_of = [&](const std::string& key) { return key == "s3:max-keys" ? max_keys : std::nullopt; };
    return policy.evaluate(request) == PolicyEffect::kAllow;
  };
  CHECK(allows(R"({"DateGreaterThan": {"aws:CurrentTime": "2023-11-14T22:13:19Z"}})"));
  CHECK_FALSE(allows(R"({"DateGreaterThan": {"aws:CurrentTime": "2023-11-14T22:13:20Z"}})"));
  CHECK(allows(R"({"DateGreaterThanEquals": {"aws:CurrentTime": "2023-11-14T22:13:20Z"}})"));
  CHECK(allows(R"({"DateLessThan": {"aws:CurrentTime": "2023-11-15"}})"));
  CHECK_FALSE(allows(R"({"DateLessThan": {"aws:CurrentTime": "2023-11-14"}})"));
  CHECK(allows(R"({"DateLessThanEquals": {"aws:EpochTime": "1700000000"}})"));
  CHECK(allows(R"({"DateEquals": {"aws:EpochTime": ["1", "2023-11-14T22:13:20.000Z"]}})"));  // any value
  CHECK_FALSE(allows(R"({"DateNotEquals": {"aws:CurrentTime": "2023-11-14T22:13:20Z"}})"));
  CHECK(allows(R"({"NumericGreaterThan": {"aws:EpochTime": "1699999999.5"}})"));
  // Both conditions of one operator must hold: a window.
  CHECK(allows(R"({"DateGreaterThan": {"aws:CurrentTime": "2023-01-01"}, "DateLessThan": {"aws:EpochTime": "1800000000"}})"));
  CHECK_FALSE(allows(R"({"DateGreaterThan": {"aws:CurrentTime": "2023-01-01"}, "DateLessThan": {"aws:EpochTime": "1600000000"}})"));

  CHECK(allows(R"({"NumericLessThanEquals": {"s3:max-keys": "10"}})", "10"));
  CHECK_FALSE(allows(R"({"NumericLessThan": {"s3:max-keys": "10"}})", "10"));
  CHECK(allows(R"({"NumericEquals": {"s3:max-keys": ["5", "10"]}})", "10"));
  CHECK(allows(R"({"NumericNotEquals": {"s3:max-keys": "5"}})", "10"));
  CHECK_FALSE(allows(R"({"NumericNotEquals": {"s3:max-keys": ["5", "10"]}})", "10"));
  CHECK(allows(R"({"NumericGreaterThanEquals": {"s3:max-keys": "10"}})", "10"));
  CHECK_FALSE(allows(R"({"NumericGreaterThan": {"s3:max-keys": "10"}})", "10"));
  CHECK_FALSE(allows(R"({"NumericLessThan": {"s3:max-keys": "10"}})", "abc"));  // not a number: no match
  // An absent key: only negations and ...IfExists match.
  CHECK_FALSE(allows(R"({"NumericLessThan": {"s3:max-keys": "10"}})"));
  CHECK(allows(R"({"NumericLessThanIfExists": {"s3:max-keys": "10"}})"));
  CHECK_FALSE(allows(R"({"NumericLessThanIfExists": {"s3:max-keys": "10"}})", "20"));
  CHECK(allows(R"({"NumericNotEquals": {"s3:max-keys": "10"}})"));
  CHECK(allows(R"({"StringEqualsIfExists": {"s3:prefix": "home/"}})"));
}

TEST_CASE("policy: aws:Referer, aws:UserAgent and the set qualifiers", "[gateway][policy]") {
  const auto allows = [](const std::string& condition, std::optional<std::string> referer) {
    const BucketPolicy policy = BucketPolicy::parse(
        R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
            "Condition": )" + condition + "}}",
        "b", kUsers);
    PolicyRequest request = ask("s3:GetObject", "arn:aws:s3:::b/k", "");
    request.value_of = [&](const std::string& key) { return key == "aws:referer" ? referer : std::nullopt; };
    return policy.evaluate(request) == PolicyEffect::kAllow;
  };
  const std::string like = R"("aws:Referer": ["http://a/*", "http://b/*"]}})";
  CHECK(allows(R"({"StringLike": {)" + like, "http://b/x"));
  CHECK_FALSE(allows(R"({"StringLike": {)" + like, "http://c/"));
  CHECK_FALSE(allows(R"({"StringLike": {)" + like, std::nullopt));
  CHECK(allows(R"({"StringLikeIfExists": {)" + like, std::nullopt));
  // The request's values for the key: one, or none when absent.
  CHECK(allows(R"({"ForAnyValue:StringLike": {)" + like, "http://a/x"));
  CHECK_FALSE(allows(R"({"ForAnyValue:StringLike": {)" + like, "http://c/"));
  CHECK_FALSE(allows(R"({"ForAnyValue:StringLike": {)" + like, std::nullopt));
  CHECK(allows(R"({"ForAnyValue:StringLikeIfExists": {)" + like, std::nullopt));
  CHECK(allows(R"({"ForAllValues:StringLike": {)" + like, "http://a/x"));
  CHECK_FALSE(allows(R"({"ForAllValues:StringLike": {)" + like, "http://c/"));
  CHECK(allows(R"({"ForAllValues:StringLike": {)" + like, std::nullopt));
  CHECK(allows(R"({"ForAllValues:StringNotLike": {)" + like, "http://c/"));
  CHECK_FALSE(allows(R"({"ForAllValues:StringNotLike": {)" + like, "http://a/"));
  CHECK(allows(R"({"ForAnyValue:StringNotEquals": {"aws:Referer": "http://a/"}})", "http://c/"));
  CHECK_FALSE(allows(R"({"ForAnyValue:StringNotEquals": {"aws:Referer": "http://a/"}})", std::nullopt));
  CHECK_FALSE(allows(R"({"StringEquals": {"aws:UserAgent": "x"}})", "x"));  // the request has no User-Agent
}

TEST_CASE("policy: what is refused when it is put", "[gateway][policy]") {
  const auto code = [](const std::string& json) {
    return error_code([&] { BucketPolicy::parse(json, "photos", kUsers); });
  };
  const std::string ok_statement = R"("Effect": "Allow", "Principal": "*", "Action": "s3:GetObject")";
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": "arn:aws:s3:::photos/*"}]})") == "");
  CHECK(code("not json") == "MalformedPolicy");
  CHECK(code(R"({"Version": "2012-10-17"})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": "arn:aws:s3:::other/*"}]})") ==
        "MalformedPolicy");
  // Patterns that take in this bucket among others are kept (a policy copied from bucket to bucket).
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"]}]})") == "");
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": "arn:aws:s3:::pho?os/*"}]})") == "");
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": "arn:aws:s3:::oth*/*"}]})") ==
        "MalformedPolicy");
  const BucketPolicy any = BucketPolicy::parse(
      R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket",
          "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"]}})", "photos", kUsers);
  CHECK(any.evaluate(ask("s3:ListBucket", "arn:aws:s3:::photos", "bob")) == PolicyEffect::kAllow);
  CHECK(code(R"({"Statement": [{"Effect": "Maybe", "Principal": "*", "Action": "s3:GetObject",
                 "Resource": "arn:aws:s3:::photos/*"}]})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{"Effect": "Allow", "Principal": {"AWS": "mallory"}, "Action": "s3:GetObject",
                 "Resource": "arn:aws:s3:::photos/*"}]})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "ec2:RunInstances",
                 "Resource": "arn:aws:s3:::photos/*"}]})") == "MalformedPolicy");
  const auto with_condition = [&](const std::string& condition) {
    return code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": "arn:aws:s3:::photos/*", "Condition": )" +
                condition + "}]}");
  };
  CHECK(with_condition(R"({"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}})") == "");
  CHECK(with_condition(R"({"DateGreaterThanIfExists": {"aws:CurrentTime": "2020-01-01"}})") == "");
  CHECK(with_condition(R"({"NumericLessThanEquals": {"s3:max-keys": "10"}})") == "");
  // Unknown operators, keys an operator cannot compare, values of the wrong kind.
  CHECK(with_condition(R"({"DateAfter": {"aws:CurrentTime": "2020-01-01"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"IfExists": {"aws:CurrentTime": "2020-01-01"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"ArnLike": {"aws:SourceArn": "arn:aws:s3:::x"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"Bool": {"aws:SecureTransport": "maybe"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"Bool": {"s3:x-amz-acl": "true"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"Null": {"s3:x-amz-server-side-encryption": "yes"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"NullIfExists": {"s3:x-amz-acl": "true"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"Null": {"aws:username": "true"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"ForAnyValue:Null": {"aws:Referer": "true"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"ForAllValues:": {"aws:Referer": "x"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"ForAnyValue:StringLike": {"s3:x-amz-acl": "public*"}})") == "");
  CHECK(with_condition(R"({"StringLike": {"s3:prefix": "home/${aws:username}/*"}})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": "arn:aws:s3:::photos/${aws:username}/*"}]})") ==
        "MalformedPolicy");
  CHECK(with_condition(R"({"DateLessThan": {"aws:CurrentTime": "yesterday"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"DateLessThan": {"s3:max-keys": "2020-01-01"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"NumericLessThan": {"s3:max-keys": "ten"}})") == "MalformedPolicy");
  CHECK(with_condition(R"({"NumericLessThan": {"aws:CurrentTime": "10"}})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "Resource": "arn:aws:s3:::photos/*",
                 "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/99"}}}]})") == "MalformedPolicy");
  // One of each pair: Principal or NotPrincipal, Action or NotAction, Resource or NotResource.
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "NotResource": "arn:aws:s3:::photos/*"}]})") == "");
  CHECK(code(R"({"Statement": [{)" + ok_statement +
             R"(, "Resource": "arn:aws:s3:::photos/*", "NotResource": "arn:aws:s3:::photos/a"}]})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{)" + ok_statement + R"(, "NotResource": "arn:aws:s3:::other/*"}]})") ==
        "MalformedPolicy");
  CHECK(code(R"({"Statement": [{"Effect": "Deny", "Principal": "*", "NotPrincipal": {"AWS": "bob"},
                 "Action": "s3:GetObject", "Resource": "arn:aws:s3:::photos/*"}]})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
                 "NotAction": "s3:PutObject", "Resource": "arn:aws:s3:::photos/*"}]})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{"Effect": "Deny", "NotPrincipal": {"AWS": "mallory"}, "Action": "s3:GetObject",
                 "Resource": "arn:aws:s3:::photos/*"}]})") == "MalformedPolicy");
  CHECK(code(R"({"Statement": [{"Effect": "Deny", "Principal": "*", "NotAction": "ec2:*",
                 "Resource": "arn:aws:s3:::photos/*"}]})") == "MalformedPolicy");
}

TEST_CASE("policy: NotPrincipal, NotAction and NotResource", "[gateway][policy]") {
  // A vault: everyone but alice is refused deletes, and anything but reads outside incoming/.
  const BucketPolicy policy = BucketPolicy::parse(R"({"Statement": [
      {"Effect": "Deny", "NotPrincipal": {"AWS": ["alice"]}, "Action": "s3:Delete*", "Resource": "arn:aws:s3:::v/*"},
      {"Effect": "Deny", "Principal": "*", "NotAction": ["s3:Get*", "s3:List*"], "NotResource": "arn:aws:s3:::v/incoming/*"},
      {"Effect": "Allow", "Principal": {"AWS": "bob"}, "NotAction": "s3:PutObjectAcl", "Resource": "arn:aws:s3:::v/*"}]})",
                                                  "v", kUsers);
  CHECK(policy.evaluate(ask("s3:DeleteObject", "arn:aws:s3:::v/incoming/x", "bob")) == PolicyEffect::kDeny);
  CHECK(policy.evaluate(ask("s3:DeleteObject", "arn:aws:s3:::v/incoming/x", "")) == PolicyEffect::kDeny);  // anonymous too
  CHECK(policy.evaluate(ask("s3:DeleteObject", "arn:aws:s3:::v/incoming/x", "alice")) == PolicyEffect::kNone);
  CHECK(policy.evaluate(ask("s3:PutObject", "arn:aws:s3:::v/incoming/x", "bob")) == PolicyEffect::kAllow);
  CHECK(policy.evaluate(ask("s3:PutObject", "arn:aws:s3:::v/done/x", "bob")) == PolicyEffect::kDeny);
  CHECK(policy.evaluate(ask("s3:GetObject", "arn:aws:s3:::v/done/x", "bob")) == PolicyEffect::kAllow);
  CHECK(policy.evaluate(ask("s3:ListBucket", "arn:aws:s3:::v", "carol")) == PolicyEffect::kNone);
  CHECK(policy.evaluate(ask("s3:PutObjectAcl", "arn:aws:s3:::v/incoming/x", "bob")) == PolicyEffect::kNone);
  CHECK_FALSE(policy.is_public());
  // An Allow to all but a named user reaches anonymous requests: public; NotPrincipal "*" reaches no one.
  const auto public_of = [](const std::string& principal) {
    return BucketPolicy::parse(R"({"Statement": {"Effect": "Allow", )" + principal +
                                   R"(, "Action": "s3:GetObject", "Resource": "arn:aws:s3:::v/*"}})",
                               "v", kUsers)
        .is_public();
  };
  CHECK(public_of(R"("NotPrincipal": {"AWS": "bob"})"));
  CHECK_FALSE(public_of(R"("NotPrincipal": "*")"));
  CHECK_FALSE(public_of(R"("Principal": {"AWS": "bob"})"));
  const BucketPolicy nobody = BucketPolicy::parse(
      R"({"Statement": {"Effect": "Allow", "NotPrincipal": {"AWS": "*"}, "Action": "s3:*", "Resource": "arn:aws:s3:::v/*"}})",
      "v", kUsers);
  CHECK(nobody.evaluate(ask("s3:GetObject", "arn:aws:s3:::v/a", "bob")) == PolicyEffect::kNone);
  CHECK(nobody.evaluate(ask("s3:GetObject", "arn:aws:s3:::v/a", "")) == PolicyEffect::kNone);
  // An account's root is every user (the gateway's users are one account), not anonymous requests.
  CHECK(public_of(R"("NotPrincipal": {"AWS": "arn:aws:iam::s3tenant1:root"})"));
  CHECK_FALSE(public_of(R"("Principal": {"AWS": "arn:aws:iam::123456789012:root"})"));
  const BucketPolicy account = BucketPolicy::parse(
      R"({"Statement": {"Effect": "Deny", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "s3:*",
          "Resource": "arn:aws:s3:::v/*"}})",
      "v", kUsers);
  CHECK(account.evaluate(ask("s3:GetObject", "arn:aws:s3:::v/a", "carol")) == PolicyEffect::kDeny);
  CHECK(account.evaluate(ask("s3:GetObject", "arn:aws:s3:::v/a", "")) == PolicyEffect::kNone);
  CHECK(error_code([] {
          BucketPolicy::parse(R"({"Statement": {"Effect": "Deny", "Principal": {"AWS": "arn:aws:iam::1:role/x"},
              "Action": "s3:*", "Resource": "arn:aws:s3:::v/*"}})", "v", kUsers);
        }) == "MalformedPolicy");
}

TEST_CASE("policy: server-side encryption keys, Null and Bool", "[gateway][policy]") {
  // The policy S3's documentation gives for "every object SSE-S3": one Deny for a wrong
  // algorithm, one for none at all. StringNotEquals on an absent key holds, as on AWS.
  const BucketPolicy sse = BucketPolicy::parse(R"({"Statement": [
      {"Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
       "Condition": {"Null": {"s3:prefix": "false"},
                     "StringEquals": {"s3:x-amz-server-side-encryption-aws-kms-key-id": ["k1", "k2"]}}},
      {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*",
       "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption": "AES256"}}},
      {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*",
       "Condition": {"Null": {"s3:x-amz-server-side-encryption": "true"}}},
      {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
       "Condition": {"Bool": {"aws:SecureTransport": "True"}}}]})",
                                               "b", kUsers);
  std::map<std::string, std::string> values;
  const auto ask_with = [&](const std::string& action, const std::string& resource) {
    return sse.evaluate(ask_with_values(action, resource, "bob", values));
  };
  CHECK(ask_with("s3:PutObject", "arn:aws:s3:::b/k") == PolicyEffect::kDeny);  // no header
  values["s3:x-amz-server-side-encryption"] = "aws:kms";
  CHECK(ask_with("s3:PutObject", "arn:aws:s3:::b/k") == PolicyEffect::kDeny);
  values["s3:x-amz-server-side-encryption"] = "AES256";
  CHECK(ask_with("s3:PutObject", "arn:aws:s3:::b/k") == PolicyEffect::kNone);
  CHECK(ask_with("s3:GetObject", "arn:aws:s3:::b/k") == PolicyEffect::kNone);  // no aws:SecureTransport value
  values["aws:securetransport"] = "false";
  CHECK(ask_with("s3:GetObject", "arn:aws:s3:::b/k") == PolicyEffect::kNone);
  values["aws:securetransport"] = "true";
  CHECK(ask_with("s3:GetObject", "arn:aws:s3:::b/k") == PolicyEffect::kAllow);
  // Null false: the key must be there; s3:prefix comes from the request itself.
  values["s3:x-amz-server-side-encryption-aws-kms-key-id"] = "k2";
  PolicyRequest list = ask_with_values("s3:ListBucket", "arn:aws:s3:::b", "bob", values);
  CHECK(sse.evaluate(list) == PolicyEffect::kNone);
  list.has_prefix = true;
  CHECK(sse.evaluate(list) == PolicyEffect::kAllow);
  values["s3:x-amz-server-side-encryption-aws-kms-key-id"] = "k3";
  CHECK(sse.evaluate(list) == PolicyEffect::kNone);
}

TEST_CASE("routing: the access subresources", "[gateway][acl]") {
  const auto op = [](const std::string& method, const std::string& target) {
    return route(parse_request(method, target, {}, {}));
  };
  CHECK(op("GET", "/bk1?acl") == Operation::kGetBucketAcl);
  CHECK(op("PUT", "/bk1?acl") == Operation::kPutBucketAcl);
  CHECK(op("GET", "/bk1/k?acl") == Operation::kGetObjectAcl);
  CHECK(op("PUT", "/bk1/k?acl&versionId=x") == Operation::kPutObjectAcl);
  CHECK(op("GET", "/bk1?policy") == Operation::kGetBucketPolicy);
  CHECK(op("DELETE", "/bk1?policy") == Operation::kDeleteBucketPolicy);
  CHECK(op("PUT", "/bk1?ownershipControls") == Operation::kPutBucketOwnershipControls);
  CHECK(op("DELETE", "/bk1?publicAccessBlock") == Operation::kDeletePublicAccessBlock);
  CHECK(error_code([&] { op("DELETE", "/bk1?acl"); }) == "MethodNotAllowed");
  CHECK(takes_body(Operation::kPutBucketPolicy));
}

TEST_CASE("cors: rules parsed, matched in order, refused when S3 refuses them", "[gateway][acl]") {
  const auto config = CorsConfiguration::parse(R"(<CORSConfiguration>
      <CORSRule><AllowedOrigin>*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod>
        <AllowedHeader>x-amz-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>30</MaxAgeSeconds></CORSRule>
      <CORSRule><ID>any</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>HEAD</AllowedMethod><AllowedMethod>GET</AllowedMethod></CORSRule>
    </CORSConfiguration>)");
  REQUIRE(config.rules().size() == 2);
  CHECK(config.match("https://a.example.com", "GET", {"x-amz-date"}) == &config.rules()[0]);
  // The first rule does not allow content-md5; the second allows no headers at all.
  CHECK(config.match("https://a.example.com", "GET", {"content-md5"}) == nullptr);
  CHECK(config.match("https://other.org", "HEAD") == &config.rules()[1]);
  CHECK(config.match("https://other.org", "PUT") == nullptr);
  const NameValues preflight = cors_headers(config.rules()[0], "https://a.example.com", true, {"x-amz-date"});
  CHECK(preflight == NameValues{{"access-control-allow-origin", "https://a.example.com"},
                                {"access-control-allow-methods", "GET"},
                                {"access-control-allow-credentials", "true"},
                                {"access-control-expose-headers", "ETag"},
                                {"access-control-allow-headers", "x-amz-date"},
                                {"access-control-max-age", "30"},
                                {"vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"}});
  CHECK(cors_headers(config.rules()[1], "https://other.org", false).front().second == "*");
  CHECK(requested_headers(" X-Amz-Date ,content-type,, ") == std::vector<std::string>{"x-amz-date", "content-type"});
  CHECK(CorsConfiguration::parse(config.to_xml()).to_xml() == config.to_xml());

  const auto code = [](const std::string& rule) {
    return error_code([&] { CorsConfiguration::parse("<CORSConfiguration>" + rule + "</CORSConfiguration>"); });
  };
  CHECK(code("") == "MalformedXML");
  CHECK(code("<CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>") == "MalformedXML");
  CHECK(code("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule>") ==
        "InvalidRequest");
  CHECK(code("<CORSRule><AllowedOrigin>*a*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>") ==
        "InvalidRequest");
  CHECK(code("<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
             "<MaxAgeSeconds>soon</MaxAgeSeconds></CORSRule>") == "MalformedXML");
}

TEST_CASE("encryption: SSE-S3 where objects are encrypted at rest, SSE-KMS with a key ring", "[gateway][acl]") {
  const auto code = [](Operation operation, NameValues headers, bool encrypted, bool kms = true) {
    return error_code([&] { check_encryption_headers(with_headers(std::move(headers)), operation, encrypted, kms); });
  };
  const NameValues sse_s3 = {{"x-amz-server-side-encryption", "AES256"}};
  const NameValues sse_kms = {{"x-amz-server-side-encryption", "aws:kms"},
                              {"x-amz-server-side-encryption-aws-kms-key-id", "testkey-1"}};
  CHECK(code(Operation::kPutObject, sse_s3, true) == "");
  CHECK(code(Operation::kCreateMultipartUpload, sse_s3, true) == "");
  CHECK(code(Operation::kPutObject, {}, false) == "");
  CHECK(code(Operation::kPutObject, sse_s3, false) == "InvalidArgument");
  CHECK(code(Operation::kCopyObject, sse_s3, false) == "InvalidArgument");
  CHECK(code(Operation::kHeadObject, sse_s3, true) == "InvalidArgument");
  CHECK(code(Operation::kPutObject, sse_kms, false) == "");
  CHECK(code(Operation::kCopyObject, {sse_kms[0]}, false) == "");  // the key id may come from a default
  CHECK(code(Operation::kPutObject, sse_kms, true, false) == "InvalidArgument");  // no key ring
  CHECK(code(Operation::kHeadObject, sse_kms, true) == "InvalidArgument");
  CHECK(code(Operation::kGetObject, sse_kms, true) == "InvalidArgument");
  CHECK(code(Operation::kPutObject, {{"x-amz-server-side-encryption-aws-kms-key-id", "k"}}, true) ==
        "InvalidArgument");
  CHECK(code(Operation::kPutObject, {{"x-amz-server-side-encryption", "aes:kms"}}, true) == "InvalidArgument");
  // An upload's parts may repeat its headers (the upload's key applies), not name others.
  CHECK(code(Operation::kUploadPart, sse_kms, false) == "");
  CHECK(code(Operation::kUploadPart, sse_s3, false) == "");
  CHECK(code(Operation::kUploadPart, {{"x-amz-server-side-encryption", "aes:kms"}}, true) == "InvalidArgument");
  // SSE-C headers are checked where the operation uses them (encryption.h's customer_key),
  // but a request cannot ask for SSE-C and SSE-S3 at once.
  CHECK(code(Operation::kUploadPart, {{"x-amz-server-side-encryption-customer-algorithm", "AES256"}}, true) == "");
  CHECK(code(Operation::kPutObject, {{"x-amz-server-side-encryption-customer-algorithm", "AES256"},
                                     {"x-amz-server-side-encryption", "AES256"}}, true) == "InvalidArgument");
  // Not an object's write or read: the headers mean nothing there.
  CHECK(code(Operation::kListObjectsV2, sse_s3, false) == "");

  GatewayKeys keys;
  const auto configuration = [](const std::string& rule) {
    return "<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault>" + rule +
           "</ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>";
  };
  const std::string aes = configuration("<SSEAlgorithm>AES256</SSEAlgorithm>");
  const std::string kms = configuration("<SSEAlgorithm>aws:kms</SSEAlgorithm><KMSMasterKeyID>testkey-1</KMSMasterKeyID>");
  const std::string kms_no_id = configuration("<SSEAlgorithm>aws:kms</SSEAlgorithm>");
  CHECK(encryption_configuration(aes, keys).find("<SSEAlgorithm>AES256</SSEAlgorithm>") != std::string::npos);
  CHECK(default_encryption(encryption_configuration(aes, keys)).algorithm == "AES256");
  CHECK(default_encryption("").algorithm.empty());
  CHECK(error_code([&] { encryption_configuration(kms, keys); }) == "InvalidArgument");  // no key ring
  keys.add_kms_key("testkey-1", keel::engine::random_key());
  const DefaultEncryption kept = default_encryption(encryption_configuration(kms, keys));
  CHECK((kept.algorithm == "aws:kms" && kept.kms_key_id == "testkey-1"));
  CHECK(error_code([&] {
          encryption_configuration(configuration("<SSEAlgorithm>aws:kms</SSEAlgorithm><KMSMasterKeyID>nokey"
                                                 "</KMSMasterKeyID>"), keys);
        }) == "KMS.NotFoundException");
  CHECK(error_code([&] { encryption_configuration(kms_no_id, keys); }) == "InvalidArgument");  // no default_key
  keys.set_default_kms_key("testkey-1");
  CHECK(default_encryption(encryption_configuration(kms_no_id, keys)).kms_key_id.empty());
  CHECK(error_code([&] { encryption_configuration(configuration("<SSEAlgorithm>aws:kms:dsse</SSEAlgorithm>"), keys); }) ==
        "InvalidArgument");
  CHECK(error_code([&] { encryption_configuration("<ServerSideEncryptionConfiguration/>", keys); }) == "MalformedXML");
}
