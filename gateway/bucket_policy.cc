#include "gateway/bucket_policy.h"

#include <arpa/inet.h>

#define BOOST_BIND_GLOBAL_PLACEHOLDERS  // json_parser includes the old boost/bind.hpp
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "gateway/acl.h"
#include "gateway/object_lock.h"
#include "gateway/s3_error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

namespace pt = boost::property_tree;

[[noreturn]] void malformed(const std::string& what) { throw S3Error("MalformedPolicy", what); }

// A JSON value that may be a string or an array of strings (property_tree
// keeps arrays as children with empty names). Policy variables (${aws:username}) are
// refused: taken literally they would never match, and a Deny would mean less than it says.
std::vector<std::string> strings(const pt::ptree& node, const std::string& what) {
  std::vector<std::string> out;
  if (node.empty()) {
    out.push_back(node.data());
  } else {
    for (const auto& [name, child] : node) {
      if (!name.empty() || !child.empty()) malformed(what + " must be a string or a list of strings");
      out.push_back(child.data());
    }
  }
  for (const auto& value : out) {
    if (value.find("${") != std::string::npos) malformed("policy variables such as '" + value + "' are not supported");
  }
  return out;
}

// The condition operators a policy may use (each but Null also with the suffix IfExists: an absent
// key then matches), by the kind of value they compare. Null asks whether a key is absent.
enum class ValueKind { kAddress, kString, kDate, kNumber, kBool, kNull };
const std::map<std::string, ValueKind, std::less<>>& condition_operators() {
  static const std::map<std::string, ValueKind, std::less<>> kOperators = {
      {"IpAddress", ValueKind::kAddress},         {"NotIpAddress", ValueKind::kAddress},
      {"StringEquals", ValueKind::kString},       {"StringNotEquals", ValueKind::kString},
      {"StringLike", ValueKind::kString},         {"StringNotLike", ValueKind::kString},
      {"DateEquals", ValueKind::kDate},           {"DateNotEquals", ValueKind::kDate},
      {"DateLessThan", ValueKind::kDate},         {"DateLessThanEquals", ValueKind::kDate},
      {"DateGreaterThan", ValueKind::kDate},      {"DateGreaterThanEquals", ValueKind::kDate},
      {"NumericEquals", ValueKind::kNumber},      {"NumericNotEquals", ValueKind::kNumber},
      {"NumericLessThan", ValueKind::kNumber},    {"NumericLessThanEquals", ValueKind::kNumber},
      {"NumericGreaterThan", ValueKind::kNumber}, {"NumericGreaterThanEquals", ValueKind::kNumber},
      {"Bool", ValueKind::kBool},                 {"Null", ValueKind::kNull}};
  return kOperators;
}

// A decimal number ("10", "-2.5"), all of `text`.
std::optional<double> parse_number(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789.-+") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

// A policy date as seconds since the epoch: epoch seconds, an ISO 8601 date ("2026-11-26",
// midnight UTC) or date and time ("2026-11-26T10:00:00Z", fractions allowed).
std::optional<double> parse_date(const std::string& text) {
  if (const auto seconds = parse_number(text)) return seconds;
  const bool date_only = text.size() == 10 && text[4] == '-' && text[7] == '-';
  const auto ns = parse_iso8601(date_only ? text + "T00:00:00Z" : text);
  if (!ns) return std::nullopt;
  return static_cast<double>(*ns) / 1e9;
}

// A condition key as compared: lower case, but for the tag key after "ObjectTag/".
std::string condition_key(const std::string& key) {
  const size_t slash = key.find('/');
  return ascii_lower(key.substr(0, slash)) + (slash == std::string::npos ? "" : key.substr(slash));
}

bool string_condition_key(const std::string& key) {
  static const std::set<std::string> kKeys = {
      "s3:prefix",          "s3:delimiter",         "s3:max-keys",                "s3:x-amz-acl",         "s3:x-amz-copy-source",       "s3:x-amz-metadata-directive",
      "s3:x-amz-grant-read", "s3:x-amz-grant-write", "s3:x-amz-grant-read-acp", "s3:x-amz-grant-write-acp",
      "s3:x-amz-grant-full-control", "s3:x-amz-server-side-encryption", "s3:x-amz-server-side-encryption-aws-kms-key-id",
      "s3:x-amz-server-side-encryption-customer-algorithm", "aws:referer", "aws:useragent"};
  for (const std::string_view tags : {"s3:requestobjecttag/", "s3:existingobjecttag/"}) {
    if (key.starts_with(tags)) return key.size() > tags.size();
  }
  return kKeys.contains(key);
}

bool time_condition_key(const std::string& key) { return key == "aws:currenttime" || key == "aws:epochtime"; }

// Whether operators of `kind` compare the key; Null takes any key another operator compares.
bool supported_condition(ValueKind kind, const std::string& key) {
  switch (kind) {
    case ValueKind::kAddress: return key == "aws:sourceip";
    case ValueKind::kString: return string_condition_key(key);
    case ValueKind::kDate: return time_condition_key(key);
    case ValueKind::kNumber: return key == "s3:max-keys" || key == "aws:epochtime";
    case ValueKind::kBool: return key == "aws:securetransport";
    case ValueKind::kNull: break;
  }
  return supported_condition(ValueKind::kAddress, key) || supported_condition(ValueKind::kString, key) ||
         supported_condition(ValueKind::kDate, key) || supported_condition(ValueKind::kBool, key);
}

const std::map<Operation, std::string_view>& action_exceptions() {
  static const std::map<Operation, std::string_view> kActions = {
      {Operation::kListBuckets, "s3:ListAllMyBuckets"},
      {Operation::kHeadBucket, "s3:ListBucket"},
      {Operation::kListObjects, "s3:ListBucket"},
      {Operation::kListObjectsV2, "s3:ListBucket"},
      {Operation::kListObjectVersions, "s3:ListBucketVersions"},
      {Operation::kListMultipartUploads, "s3:ListBucketMultipartUploads"},
      {Operation::kDeleteObjects, "s3:DeleteObject"},
      {Operation::kCopyObject, "s3:PutObject"},
      {Operation::kHeadObject, "s3:GetObject"},
      {Operation::kCreateMultipartUpload, "s3:PutObject"},
      {Operation::kUploadPart, "s3:PutObject"},
      {Operation::kUploadPartCopy, "s3:PutObject"},
      {Operation::kCompleteMultipartUpload, "s3:PutObject"},
      {Operation::kAbortMultipartUpload, "s3:AbortMultipartUpload"},
      {Operation::kListParts, "s3:ListMultipartUploadParts"},
      {Operation::kGetObjectLockConfiguration, "s3:GetBucketObjectLockConfiguration"},
      {Operation::kPutObjectLockConfiguration, "s3:PutBucketObjectLockConfiguration"},
      {Operation::kGetBucketOwnershipControls, "s3:GetBucketOwnershipControls"},
      {Operation::kPutBucketOwnershipControls, "s3:PutBucketOwnershipControls"},
      {Operation::kDeleteBucketOwnershipControls, "s3:PutBucketOwnershipControls"},
      {Operation::kGetPublicAccessBlock, "s3:GetBucketPublicAccessBlock"},
      {Operation::kPutPublicAccessBlock, "s3:PutBucketPublicAccessBlock"},
      {Operation::kDeletePublicAccessBlock, "s3:PutBucketPublicAccessBlock"},
      {Operation::kGetBucketCors, "s3:GetBucketCORS"},
      {Operation::kPutBucketCors, "s3:PutBucketCORS"},
      {Operation::kDeleteBucketCors, "s3:PutBucketCORS"},
      {Operation::kGetBucketEncryption, "s3:GetEncryptionConfiguration"},
      {Operation::kPutBucketEncryption, "s3:PutEncryptionConfiguration"},
      {Operation::kDeleteBucketEncryption, "s3:PutEncryptionConfiguration"},
      {Operation::kGetBucketLifecycle, "s3:GetLifecycleConfiguration"},
      {Operation::kPutBucketLifecycle, "s3:PutLifecycleConfiguration"},
      {Operation::kDeleteBucketLifecycle, "s3:PutLifecycleConfiguration"},
  };
  return kActions;
}

// The address as 16 bytes (IPv4 mapped into IPv6), and its bit length in that space.
bool parse_address(const std::string& text, std::array<uint8_t, 16>& out, int& bits) {
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    out = {};
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, &v4, 4);
    bits = 32;
    return true;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::memcpy(out.data(), &v6, 16);
    bits = 128;
    return true;
  }
  return false;
}

bool valid_block(const std::string& block) {
  std::array<uint8_t, 16> address{};
  int bits = 0;
  const size_t slash = block.find('/');
  if (!parse_address(block.substr(0, slash), address, bits)) return false;
  if (slash == std::string::npos) return true;
  const std::string length = block.substr(slash + 1);
  return !length.empty() && length.size() <= 3 && length.find_first_not_of("0123456789") == std::string::npos &&
         std::stoi(length) <= bits;
}

}  // namespace

bool wildcard_match(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool address_in_block(const std::string& address, const std::string& block) {
  std::array<uint8_t, 16> a{}, b{};
  int a_bits = 0, b_bits = 0;
  const size_t slash = block.find('/');
  if (!parse_address(address, a, a_bits) || !parse_address(block.substr(0, slash), b, b_bits)) return false;
  if (a_bits != b_bits) return false;
  int length = slash == std::string::npos ? b_bits : std::stoi(block.substr(slash + 1));
  length += 128 - b_bits;  // IPv4 prefixes count within the mapped space
  for (int i = 0; i < 16 && length > 0; ++i, length -= 8) {
    const uint8_t mask = length >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - length));
    if ((a[i] & mask) != (b[i] & mask)) return false;
  }
  return true;
}

std::string policy_action(Operation operation) {
  const auto& exceptions = action_exceptions();
  const auto it = exceptions.find(operation);
  if (it != exceptions.end()) return std::string(it->second);
  return "s3:" + std::string(operation_name(operation));
}

BucketPolicy BucketPolicy::parse(const std::string& json, const std::string& bucket, const std::vector<User>& users) {
  pt::ptree tree;
  std::istringstream in(json);
  try {
    pt::read_json(in, tree);
  } catch (const pt::json_parser_error& e) {
    malformed("the policy is not valid JSON: " + e.message());
  }
  for (const auto& [name, _] : tree) {
    if (name != "Version" && name != "Id" && name != "Statement") malformed("unknown policy element '" + name + "'");
  }
  const auto statements = tree.get_child_optional("Statement");
  if (!statements || (statements->empty() && statements->data().empty())) malformed("the policy has no Statement");
  std::vector<const pt::ptree*> list;
  if (statements->begin() != statements->end() && statements->begin()->first.empty()) {
    for (const auto& entry : *statements) list.push_back(&entry.second);
  } else {
    list.push_back(&*statements);
  }
  const std::string bucket_arn = "arn:aws:s3:::" + bucket;
  BucketPolicy policy;
  for (const auto* node : list) {
    Statement statement;
    bool has_principal = false, has_action = false, has_resource = false;
    // Principal and NotPrincipal (and the other pairs) exclude each other, as in AWS.
    const auto first = [](bool& seen, const std::string& pair) {
      if (seen) malformed("a statement takes one of " + pair);
      seen = true;
    };
    for (const auto& [name, value] : *node) {
      if (name == "Sid") continue;
      if (name == "Effect") {
        if (value.data() != "Allow" && value.data() != "Deny") malformed("Effect must be Allow or Deny");
        statement.allow = value.data() == "Allow";
      } else if (name == "Principal" || name == "NotPrincipal") {
        first(has_principal, "Principal and NotPrincipal");
        statement.not_principal = name == "NotPrincipal";
        if (value.empty()) {
          if (value.data() != "*") malformed("Principal must be \"*\" or {\"AWS\": ...}");
          statement.everyone = true;
          continue;
        }
        for (const auto& [kind, principals] : value) {
          if (kind != "AWS" && kind != "CanonicalUser") malformed("principals of type '" + kind + "' are not supported");
          for (const auto& principal : strings(principals, "Principal")) {
            if (principal == "*") {
              statement.everyone = true;
              continue;
            }
            // An account's root stands for every user of the account, and the gateway's users are
            // one account whatever number the ARN names (as with :user/NAME below).
            if (kind == "AWS" && principal.starts_with("arn:aws:iam::") && principal.ends_with(":root") &&
                principal.find('/') == std::string::npos) {
              statement.all_users = true;
              continue;
            }
            const auto user = std::find_if(users.begin(), users.end(), [&](const User& u) {
              return kind == "CanonicalUser" ? canonical_id(u.name) == principal
                                             : principal == u.name || (principal.starts_with("arn:aws:iam::") &&
                                                                       principal.ends_with(":user/" + u.name));
            });
            if (user == users.end()) malformed("Invalid principal in policy: '" + principal + "'");
            statement.users.push_back(user->name);
          }
        }
      } else if (name == "Action" || name == "NotAction") {
        first(has_action, "Action and NotAction");
        statement.not_action = name == "NotAction";
        for (auto action : strings(value, name)) {
          action = ascii_lower(action);
          if (!action.starts_with("s3:") && action != "*") malformed("Action '" + action + "' is not an s3: action");
          statement.actions.push_back(action == "*" ? "s3:*" : action);
        }
      } else if (name == "Resource" || name == "NotResource") {
        first(has_resource, "Resource and NotResource");
        statement.not_resource = name == "NotResource";
        for (const auto& resource : strings(value, name)) {
          // The part before the first '/' names buckets; a pattern that takes in this bucket (as
          // arn:aws:s3:::* does) is kept, one for other buckets only would never apply here.
          if (resource != "*" && !wildcard_match(resource.substr(0, resource.find('/')), bucket_arn)) {
            malformed("Policy has invalid resource '" + resource + "': not this bucket or its objects");
          }
          statement.resources.push_back(resource);
        }
      } else if (name == "Condition") {
        for (const auto& [op, keys] : value) {
          using SetQualifier = Condition::SetQualifier;
          std::string_view unqualified = op;
          SetQualifier set = SetQualifier::kNone;
          for (const auto& [prefix, qualifier] : {std::pair{std::string_view("ForAnyValue:"), SetQualifier::kAnyValue},
                                                  std::pair{std::string_view("ForAllValues:"), SetQualifier::kAllValues}}) {
            if (unqualified.starts_with(prefix)) {
              unqualified.remove_prefix(prefix.size());
              set = qualifier;
            }
          }
          constexpr std::string_view kIfExists = "IfExists";
          const bool if_exists = unqualified.ends_with(kIfExists) && unqualified.size() > kIfExists.size();
          const std::string base(if_exists ? unqualified.substr(0, unqualified.size() - kIfExists.size()) : unqualified);
          const auto known = condition_operators().find(base);
          if (known == condition_operators().end()) malformed("the condition operator '" + op + "' is not supported");
          const ValueKind kind = known->second;
          if (kind == ValueKind::kNull && (if_exists || set != SetQualifier::kNone)) {
            malformed("the condition operator '" + op + "' does not exist");
          }
          for (const auto& [key, values] : keys) {
            Condition condition{base, condition_key(key), strings(values, "a condition value"), if_exists, {}, set};
            if (!supported_condition(kind, condition.key)) {
              malformed("the condition key '" + key + "' is not supported with " + op);
            }
            if (kind == ValueKind::kBool || kind == ValueKind::kNull) {
              for (auto& v : condition.values) {
                v = ascii_lower(v);
                if (v != "true" && v != "false") malformed(op + " takes \"true\" or \"false\", not '" + v + "'");
              }
            }
            if (kind == ValueKind::kAddress &&
                !std::all_of(condition.values.begin(), condition.values.end(), valid_block)) {
              malformed("aws:SourceIp needs addresses or CIDR blocks");
            }
            if (kind == ValueKind::kDate || kind == ValueKind::kNumber) {
              for (const auto& v : condition.values) {
                const auto number = kind == ValueKind::kDate ? parse_date(v) : parse_number(v);
                if (!number) malformed("'" + v + "' is not a " + (kind == ValueKind::kDate ? "date" : "number") +
                                       " for " + op);
                condition.numbers.push_back(*number);
              }
            }
            statement.conditions.push_back(std::move(condition));
          }
        }
      } else {
        malformed("the statement element '" + name + "' is not supported");
      }
    }
    if (!statement.everyone && !statement.all_users && statement.users.empty()) malformed("a statement needs a Principal or NotPrincipal");
    if (statement.actions.empty()) malformed("a statement needs an Action or NotAction");
    if (statement.resources.empty()) malformed("a statement needs a Resource or NotResource");
    policy.statements_.push_back(std::move(statement));
  }
  return policy;
}

bool BucketPolicy::conditions_hold(const Statement& statement, const PolicyRequest& request) {
  return std::all_of(statement.conditions.begin(), statement.conditions.end(), [&](const Condition& c) {
    const bool negated = c.op.find("Not") != std::string::npos;
    std::optional<std::string> value;
    if (c.key == "aws:sourceip") {
      value = request.source_ip;
    } else if (c.key == "s3:prefix") {
      if (request.has_prefix) value = request.prefix;
    } else if (time_condition_key(c.key)) {
      value = std::to_string(request.now_s);
    } else if (request.value_of) {
      value = request.value_of(c.key);
    }
    if (c.op == "Null") {
      return std::any_of(c.values.begin(), c.values.end(), [&](const std::string& v) { return (v == "true") == !value; });
    }
    // An absent key matches only the negated operators (as AWS counts them: a request without
    // x-amz-server-side-encryption is StringNotEquals "AES256") and ...IfExists; under a set
    // qualifier it is the empty set, which no value of ForAnyValue: and every one of ForAllValues: holds.
    if (!value) {
      switch (c.set) {
        case Condition::SetQualifier::kAnyValue: return c.if_exists;
        case Condition::SetQualifier::kAllValues: return true;
        case Condition::SetQualifier::kNone: return c.if_exists || negated;
      }
    }
    bool any;
    if (!c.numbers.empty()) {
      const auto number = parse_number(*value);
      if (!number) return false;  // not a number: no numeric comparison holds
      any = std::any_of(c.numbers.begin(), c.numbers.end(), [&](double v) {
        const double n = *number;
        if (c.op.ends_with("LessThan")) return n < v;
        if (c.op.ends_with("LessThanEquals")) return n <= v;
        if (c.op.ends_with("GreaterThan")) return n > v;
        if (c.op.ends_with("GreaterThanEquals")) return n >= v;
        return n == v;  // Equals, NotEquals
      });
    } else {
      any = std::any_of(c.values.begin(), c.values.end(), [&](const std::string& v) {
        if (c.key == "aws:sourceip") return address_in_block(*value, v);
        if (c.op == "Bool") return v == ascii_lower(*value);
        return c.op.find("Like") != std::string::npos ? wildcard_match(v, *value) : v == *value;
      });
    }
    return negated ? !any : any;
  });
}

PolicyEffect BucketPolicy::evaluate(const PolicyRequest& request) const {
  const std::string action = ascii_lower(request.action);
  PolicyEffect effect = PolicyEffect::kNone;
  for (const auto& statement : statements_) {
    const bool named = statement.everyone ||
                       (!request.user.empty() && (statement.all_users || std::find(statement.users.begin(),
                                                                                   statement.users.end(),
                                                                                   request.user) != statement.users.end()));
    const bool listed_action = std::any_of(statement.actions.begin(), statement.actions.end(),
                                           [&](const std::string& a) { return wildcard_match(a, action); });
    const bool listed_resource = std::any_of(statement.resources.begin(), statement.resources.end(),
                                             [&](const std::string& r) { return wildcard_match(r, request.resource); });
    const bool principal = named != statement.not_principal;
    const bool acts = listed_action != statement.not_action;
    const bool resource = listed_resource != statement.not_resource;
    if (!principal || !acts || !resource || !conditions_hold(statement, request)) continue;
    if (!statement.allow) return PolicyEffect::kDeny;
    effect = PolicyEffect::kAllow;
  }
  return effect;
}

bool BucketPolicy::is_public() const {
  return std::any_of(statements_.begin(), statements_.end(), [](const Statement& s) {
    return s.allow && s.reaches_anonymous() &&
           std::none_of(s.conditions.begin(), s.conditions.end(),
                        [](const Condition& c) { return c.key == "aws:sourceip"; });
  });
}

}  // namespace keel::gateway
