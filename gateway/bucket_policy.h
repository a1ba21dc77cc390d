// A bucket policy subset (the JSON of PutBucketPolicy): statements with
// Effect Allow or Deny, Principal or NotPrincipal ("*", {"AWS": user name, IAM
// user ARN, account root ARN or "*"}, {"CanonicalUser": id}), Action or NotAction (s3:..., with *
// and ? wildcards), Resource or NotResource (ARNs of this bucket and its
// objects, wildcards allowed), and Condition operators IpAddress/NotIpAddress on
// aws:SourceIp, String(Not)Equals/String(Not)Like on s3:prefix, s3:x-amz-acl,
// s3:x-amz-grant-*, s3:x-amz-copy-source, s3:x-amz-metadata-directive,
// s3:x-amz-server-side-encryption(-aws-kms-key-id), s3:RequestObjectTag/<key>,
// s3:ExistingObjectTag/<key>, s3:delimiter, s3:max-keys, aws:Referer and aws:UserAgent, Date operators
// (DateEquals, DateLessThan, ...) on aws:CurrentTime and aws:EpochTime, Numeric ones
// (NumericEquals, NumericLessThan, ...) on s3:max-keys and aws:EpochTime, Bool on
// aws:SecureTransport, each also as ...IfExists and with the set qualifiers ForAnyValue: and
// ForAllValues:, and Null on any of these keys.
// A Deny that matches wins over any Allow. Anything else is refused when the policy
// is put (MalformedPolicy), so a policy never means less than it says.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gateway/config.h"
#include "gateway/request.h"

namespace keel::gateway {

// What a request asks, in the terms a policy speaks.
struct PolicyRequest {
  std::string action;    // "s3:GetObject"
  std::string resource;  // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
  std::string user;      // user name; empty for an anonymous request
  std::string source_ip;  // the client's address
  bool has_prefix = false;  // ListObjects with a prefix parameter
  std::string prefix;
  int64_t now_s = 0;  // the request's time, seconds since the epoch (aws:CurrentTime, aws:EpochTime)
  // The value of another condition key (as kept: "s3:x-amz-acl",
  // "s3:RequestObjectTag/<key>", ...); nullopt when the request has none.
  std::function<std::optional<std::string>(const std::string& key)> value_of;
};

enum class PolicyEffect { kNone, kAllow, kDeny };

class BucketPolicy {
 public:
  // Throws S3Error MalformedPolicy naming what is wrong or unsupported.
  static BucketPolicy parse(const std::string& json, const std::string& bucket, const std::vector<User>& users);

  // Deny if a Deny statement matches, else Allow if an Allow does, else None.
  PolicyEffect evaluate(const PolicyRequest& request) const;
  // Whether an Allow reaches anonymous users or everyone (PublicAccessBlock's notion:
  // principal "*" without a SourceIp condition).
  bool is_public() const;

 private:
  struct Condition {
    std::string op;   // IpAddress, StringNotLike, DateLessThan, NumericEquals, Bool, Null (without IfExists)
    std::string key;  // aws:sourceip, s3:prefix, ... (lower case but for a tag key after '/')
    std::vector<std::string> values;
    bool if_exists = false;       // ...IfExists: an absent key matches
    std::vector<double> numbers;  // Date and Numeric operators: the values as numbers (dates in epoch seconds)
    // ForAnyValue:/ForAllValues: the operator holds for some/every value the request has for the
    // key (one or none here): no value holds for none, and for all.
    enum class SetQualifier { kNone, kAnyValue, kAllValues } set = SetQualifier::kNone;
  };
  struct Statement {
    bool allow = true;
    bool everyone = false;   // "*": anonymous requests too
    bool all_users = false;  // an account's root (arn:aws:iam::ACCOUNT:root): every signed request
    std::vector<std::string> users;
    std::vector<std::string> actions;    // lower case patterns
    std::vector<std::string> resources;  // patterns
    // NotPrincipal, NotAction, NotResource: the statement applies to all but what the list names.
    bool not_principal = false;
    bool not_action = false;
    bool not_resource = false;
    std::vector<Condition> conditions;
    // Whether anonymous requests are among the principals the statement applies to.
    bool reaches_anonymous() const { return everyone != not_principal; }
  };
  static bool conditions_hold(const Statement& statement, const PolicyRequest& request);
  std::vector<Statement> statements_;
};

// Whether `text` matches `pattern`, where * is any run of characters and ? any one.
bool wildcard_match(std::string_view pattern, std::string_view text);
// Whether the address (IPv4 or IPv6) is inside the CIDR block ("10.0.0.0/8", or
// one address); false for anything unparsable.
bool address_in_block(const std::string& address, const std::string& block);

// The policy action ("s3:GetObject") an operation is authorised as.
std::string policy_action(Operation operation);

}  // namespace keel::gateway
