// Access control of S3Api: authorisation of each request by the
// configuration's grants, the bucket policy and the ACLs; the ACL, policy,
// ownership-controls and public-access-block operations; the ACL a write
// asks for with x-amz-acl or x-amz-grant-* headers.
#include <boost/property_tree/ptree.hpp>

#include "gateway/access_rules.h"
#include "gateway/encryption.h"
#include "gateway/s3_api.h"
#include "gateway/s3_api_util.h"
#include "gateway/tagging.h"
#include "gateway/xml_reader.h"
#include "util/error.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

// Which ACL permission, on the bucket or on the object, lets a request through.
enum class AclNeed { kNone, kBucket, kObject };
struct AclPermission {
  AclNeed on = AclNeed::kNone;
  Permission permission = Permission::kRead;
};

AclPermission acl_permission(Operation operation) {
  switch (operation) {
    case Operation::kHeadBucket:
    case Operation::kGetBucketLocation:
    case Operation::kListObjects:
    case Operation::kListObjectsV2:
    case Operation::kListObjectVersions:
    case Operation::kListMultipartUploads:
      return {AclNeed::kBucket, Permission::kRead};
    case Operation::kPutObject:
    case Operation::kCopyObject:
    case Operation::kDeleteObject:
    case Operation::kDeleteObjects:
    case Operation::kCreateMultipartUpload:
    case Operation::kUploadPart:
    case Operation::kUploadPartCopy:
    case Operation::kCompleteMultipartUpload:
    case Operation::kAbortMultipartUpload:
    case Operation::kListParts:
      return {AclNeed::kBucket, Permission::kWrite};
    case Operation::kGetBucketAcl: return {AclNeed::kBucket, Permission::kReadAcp};
    case Operation::kPutBucketAcl: return {AclNeed::kBucket, Permission::kWriteAcp};
    case Operation::kGetObject:
    case Operation::kHeadObject:
      return {AclNeed::kObject, Permission::kRead};
    case Operation::kGetObjectAcl: return {AclNeed::kObject, Permission::kReadAcp};
    case Operation::kPutObjectAcl: return {AclNeed::kObject, Permission::kWriteAcp};
    default:
      return {};
  }
}

bool is_policy_operation(Operation operation) {
  return operation == Operation::kGetBucketPolicy || operation == Operation::kPutBucketPolicy ||
         operation == Operation::kDeleteBucketPolicy;
}

// Operations whose new object (or bucket) takes the ACL of x-amz-acl / x-amz-grant-*.
bool writes_with_acl(Operation operation) {
  return operation == Operation::kPutObject || operation == Operation::kCopyObject ||
         operation == Operation::kCompleteMultipartUpload || operation == Operation::kCreateBucket;
}

std::string encode_block(const PublicAccessBlock& b) {
  std::string out;
  for (bool flag : {b.block_public_acls, b.ignore_public_acls, b.block_public_policy, b.restrict_public_buckets}) {
    out += flag ? '1' : '0';
  }
  return out;
}

PublicAccessBlock decode_block(const std::string& text) {
  const auto at = [&](size_t i) { return i < text.size() && text[i] == '1'; };
  return {at(0), at(1), at(2), at(3)};
}

constexpr std::array<std::string_view, 4> kBlockNames = {"BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy",
                                                         "RestrictPublicBuckets"};

// A body that runs `after` once the operation it wraps has answered 200.
class ThenBody final : public RequestBody {
 public:
  ThenBody(std::unique_ptr<RequestBody> inner, std::function<void(const Response&)> after)
      : inner_(std::move(inner)), after_(std::move(after)) {}
  void write(ByteView data) override { inner_->write(data); }
  Response finish() override {
    Response response = inner_->finish();
    if (response.status == 200) after_(response);
    return response;
  }

 private:
  std::unique_ptr<RequestBody> inner_;
  std::function<void(const Response&)> after_;
};

std::string header_of(const Response& response, std::string_view name) {
  for (const auto& [n, v] : response.headers) {
    if (n == name) return v;
  }
  return {};
}

}  // namespace

std::shared_ptr<const BucketAccessRules> S3Api::load_access_rules(const std::string& bucket) {
  auto rules = std::make_shared<BucketAccessRules>();
  if (const std::string acl = access_store_.setting(bucket, "acl"); !acl.empty()) rules->acl = decode_acl(acl);
  rules->policy_json = access_store_.setting(bucket, "policy");
  if (!rules->policy_json.empty()) {
    try {
      rules->policy = BucketPolicy::parse(rules->policy_json, bucket, config_.users);
    } catch (const S3Error& e) {
      throw Error(ErrorKind::kUsage, "the policy of bucket '" + bucket + "' no longer holds (" + e.what() +
                                         "): restore the user it names, or delete the policy");
    }
  }
  rules->ownership = access_store_.setting(bucket, "ownership");
  if (const std::string block = access_store_.setting(bucket, "public_access_block"); !block.empty()) {
    rules->public_access_block = decode_block(block);
  }
  if (const std::string cors = access_store_.setting(bucket, "cors"); !cors.empty()) {
    rules->cors = CorsConfiguration::parse(cors);
  }
  return rules;
}

void S3Api::store_access_setting(Bucket& bucket, const std::string& name, const std::string& value) {
  std::lock_guard lock(mutex_);
  access_store_.set_setting(bucket.record.name, name, value);
  bucket.rules = load_access_rules(bucket.record.name);
}

Acl S3Api::object_acl(const Bucket& bucket, const ObjectRecord& object) {
  std::optional<std::string> stored;
  {
    std::lock_guard lock(mutex_);
    stored = access_store_.object_acl(bucket.record.name, object.key, object.version_id, object.modified_ns);
  }
  return stored ? decode_acl(*stored) : canned_acl("private", owner_of(bucket, object), bucket.record.owner);
}

std::string S3Api::owner_for_write(const Call& call, const Bucket& bucket) {
  std::lock_guard lock(mutex_);
  return bucket.rules->owner_for_write(call.user.name, call.request.header("x-amz-acl"), bucket.record.owner);
}

std::string S3Api::owner_of(const Bucket& bucket, const ObjectRecord& object) {
  std::lock_guard lock(mutex_);
  return bucket.rules->shown_owner(object.owner, bucket.record.owner);
}

void S3Api::authorize(const Call& call, const Bucket& bucket, Access needed) {
  const Access level = access(bucket, call.user);
  std::shared_ptr<const BucketAccessRules> rules;
  {
    std::lock_guard lock(mutex_);
    rules = bucket.rules;
  }
  // The append grant is a ceiling: no ACL or policy lets such a user delete or replace.
  if (level == Access::kAppend && needed > Access::kAppend) {
    throw S3Error("AccessDenied", "user '" + call.user.name + "' has the append grant in bucket '" +
                                      bucket.record.name + "': it may create, read and list objects, not delete or change them");
  }
  // S3's ACLs bind the owner of a bucket made through the API (below), not a configured
  // bucket's owner, who keeps every right so that a backup's owner can always restore.
  const bool acls = !rules->acls_disabled();
  const bool owner_by_acls = level == Access::kOwner && !bucket.record.configured && acls;
  if (level >= needed && !rules->policy && !owner_by_acls) return;  // the common case, kept cheap
  const Operation routed = route(call.request);
  Operation operation = routed;
  // The source of a copy is read.
  if ((operation == Operation::kCopyObject || operation == Operation::kUploadPartCopy) && needed == Access::kRead) {
    operation = Operation::kGetObject;
  }
  const AclPermission wanted = acl_permission(operation);
  // The level the configuration gives, but for such an owner, as S3: listing and writing
  // need the bucket ACL's READ and WRITE once an ACL was put (none put: the owner's
  // FULL_CONTROL), objects and their ACLs the object's ACL (whose owner keeps READ_ACP and
  // WRITE_ACP); the bucket's own ACL, policy and settings stay the owner's.
  const bool data_on_bucket =
      wanted.on == AclNeed::kBucket && (wanted.permission == Permission::kRead || wanted.permission == Permission::kWrite);
  const bool by_acls = owner_by_acls && (wanted.on == AclNeed::kObject || (data_on_bucket && rules->acl));
  const Access floor = by_acls ? Access::kNone : level;
  if (floor >= needed && !rules->policy) return;
  const S3Request& r = call.request;
  const PublicAccessBlock block = rules->block();
  const auto policy_says = [&](Operation as, const std::string& key) {
    return policy_effect(call, bucket, *rules, as, key, level);
  };
  // admit() judged this request under these rules already.
  const bool admitted = call.policy_verdict && call.policy_verdict->rules == rules && operation == routed;
  const PolicyEffect effect = admitted ? call.policy_verdict->effect : policy_says(operation, r.key);
  refuse_policy_deny(bucket, operation, effect, level);
  const Acl bucket_acl = rules->acl.value_or(canned_acl("private", bucket.record.owner, bucket.record.owner));
  const bool ignore_public = block.ignore_public_acls;
  // Reading an object that someone is allowed to read only by a policy or ACL: S3 tells
  // those who may also list the bucket that the key is missing (404), others 403.
  if (wanted.on == AclNeed::kObject && floor < Access::kRead) {
    std::optional<ObjectRecord> object;
    {
      std::lock_guard lock(mutex_);
      object = metadata_.object(bucket.record.name, r.key, r.query_value("versionId").value_or(""));
    }
    if (object && !object->delete_marker) {
      const bool on_acl = wanted.permission == Permission::kReadAcp || wanted.permission == Permission::kWriteAcp;
      if (effect == PolicyEffect::kAllow || (acls && on_acl && owner_of(bucket, *object) == call.user.name) ||
          (acls && acl_allows(object_acl(bucket, *object), call.user.name, wanted.permission, ignore_public))) {
        return;
      }
    } else if ((acls && acl_allows(bucket_acl, call.user.name, Permission::kRead, ignore_public)) ||
               policy_says(Operation::kListObjects, "") == PolicyEffect::kAllow) {
      return;
    }
  } else {
    if (floor >= needed || effect == PolicyEffect::kAllow) return;
    if (acls && wanted.on == AclNeed::kBucket &&
        acl_allows(bucket_acl, call.user.name, wanted.permission, ignore_public)) {
      return;
    }
  }
  throw S3Error("AccessDenied", call.user.name.empty()
                                    ? "anonymous requests may not do this in bucket '" + bucket.record.name + "'"
                                    : "user '" + call.user.name + "' may not do this in bucket '" +
                                          bucket.record.name + "'");
}

PolicyEffect S3Api::policy_effect(const Call& call, const Bucket& bucket, const BucketAccessRules& rules,
                                  Operation operation, const std::string& key, Access level) {
  if (!rules.policy) return PolicyEffect::kNone;
  const S3Request& r = call.request;
  const PolicyRequest question{policy_action(operation),
                               "arn:aws:s3:::" + bucket.record.name + (key.empty() ? "" : "/" + key),
                               call.user.name, r.client_address, r.has_query("prefix"),
                               r.query_value("prefix").value_or(""), now_ns() / 1'000'000'000,
                               [&](const std::string& condition) { return condition_value(call, bucket, condition); }};
  const PolicyEffect effect = rules.policy->evaluate(question);
  // RestrictPublicBuckets: a public policy grants nothing to those the configuration does not name.
  if (effect == PolicyEffect::kAllow && rules.block().restrict_public_buckets && rules.policy->is_public() &&
      level == Access::kNone) {
    return PolicyEffect::kNone;
  }
  return effect;
}

void S3Api::refuse_policy_deny(const Bucket& bucket, Operation operation, PolicyEffect effect, Access level) {
  // The owner can always mend the policy that locks it out.
  if (effect == PolicyEffect::kDeny && !(level == Access::kOwner && is_policy_operation(operation))) {
    throw S3Error("AccessDenied", "the bucket policy of '" + bucket.record.name + "' denies this request");
  }
}

std::optional<S3Api::PolicyVerdict> S3Api::refuse_denied_early(const Call& call, Operation operation) {
  // A form's signer and key are known only from its fields: its PutObject is admitted then.
  if (operation == Operation::kPostObject) return std::nullopt;
  std::shared_ptr<Bucket> bucket;
  std::shared_ptr<const BucketAccessRules> rules;
  {
    std::lock_guard lock(mutex_);
    const auto it = buckets_.find(call.request.bucket);
    if (it == buckets_.end()) return std::nullopt;  // the operation answers NoSuchBucket
    bucket = it->second;
    rules = bucket->rules;
  }
  if (!rules->policy) return std::nullopt;
  const Access level = access(*bucket, call.user);
  const PolicyEffect effect = policy_effect(call, *bucket, *rules, operation, call.request.key, level);
  refuse_policy_deny(*bucket, operation, effect, level);
  return PolicyVerdict{std::move(rules), effect};
}

std::optional<std::string> S3Api::condition_value(const Call& call, const Bucket& bucket, const std::string& key) {
  const S3Request& r = call.request;
  if (key == "aws:securetransport") return r.secure ? "true" : "false";
  const auto tag = [&key](const NameValues& tags) -> std::optional<std::string> {
    const std::string name = key.substr(key.find('/') + 1);
    const auto it = std::find_if(tags.begin(), tags.end(), [&](const auto& t) { return t.first == name; });
    return it == tags.end() ? std::nullopt : std::optional(it->second);
  };
  if (key.starts_with("s3:requestobjecttag/")) {
    return r.has_header("x-amz-tagging") ? tag(parse_tagging_header(r.header("x-amz-tagging"))) : std::nullopt;
  }
  if (key.starts_with("s3:existingobjecttag/")) {
    std::optional<ObjectRecord> object;
    {
      std::lock_guard lock(mutex_);
      object = metadata_.object(bucket.record.name, r.key, r.query_value("versionId").value_or(""));
    }
    return object && !object->delete_marker ? tag(object->tags) : std::nullopt;
  }
  if (key == "s3:max-keys" || key == "s3:delimiter") return r.query_value(key.substr(3));
  for (const auto& [policy_key, header] : {std::pair{"aws:referer", "referer"}, std::pair{"aws:useragent", "user-agent"}}) {
    if (key == policy_key) return r.has_header(header) ? std::optional(r.header(header)) : std::nullopt;
  }
  const std::string header = key.substr(3);  // s3:x-amz-...
  if (!r.has_header(header)) return std::nullopt;
  std::string value = r.header(header);
  if (header == "x-amz-copy-source") {
    // As the policy names it: bucket/key, decoded, without a leading '/' or ?versionId.
    value = percent_decode(value.substr(0, value.find('?')));
    if (value.starts_with('/')) value.erase(0, 1);
  }
  return value;
}

std::optional<Acl> S3Api::requested_acl(const Call& call, Operation operation) {
  if (!writes_with_acl(operation) && operation != Operation::kCreateMultipartUpload) return std::nullopt;
  const S3Request& r = call.request;
  std::shared_ptr<const BucketAccessRules> rules = std::make_shared<BucketAccessRules>();
  std::string bucket_owner = call.user.name;
  {
    std::lock_guard lock(mutex_);
    const auto it = buckets_.find(r.bucket);
    if (it != buckets_.end()) {
      rules = it->second->rules;
      bucket_owner = it->second->record.owner;
    } else if (operation != Operation::kCreateBucket) {
      return std::nullopt;  // the operation answers NoSuchBucket
    }
  }
  // What an object write creates is its owner's (S3's object ownership), a bucket its creator's.
  const std::string owner = operation == Operation::kCreateBucket
                                ? bucket_owner
                                : rules->owner_for_write(call.user.name, r.header("x-amz-acl"), bucket_owner);
  const RequestedAcl requested = acl_from_headers(r, owner, bucket_owner, config_.users);
  if (!requested.given) return std::nullopt;
  if (operation == Operation::kCreateBucket && r.header("x-amz-object-ownership") == "BucketOwnerEnforced" &&
      r.header("x-amz-acl") != "bucket-owner-full-control" && r.header("x-amz-acl") != "private") {
    throw S3Error("InvalidBucketAclWithObjectOwnership",
                  "a bucket created with ObjectOwnership BucketOwnerEnforced takes no ACL but 'private'");
  }
  if (rules->acls_disabled() && r.header("x-amz-acl") != "bucket-owner-full-control" &&
      r.header("x-amz-acl") != "private") {
    throw S3Error("AccessControlListNotSupported", "the bucket does not allow ACLs (BucketOwnerEnforced)");
  }
  if (rules->block().block_public_acls && acl_is_public(requested.acl)) {
    throw S3Error("AccessDenied", "the bucket's public access block refuses public ACLs");
  }
  if (operation == Operation::kCreateMultipartUpload && acl_is_public(requested.acl)) {
    throw S3Error("NotImplemented", "set a public ACL with PutObjectAcl once the upload is complete");
  }
  if (operation == Operation::kCreateMultipartUpload || rules->acls_disabled()) return std::nullopt;
  return requested.acl;
}

Exchange S3Api::apply_acl_after(Exchange exchange, const Call& call, Operation operation, Acl acl) {
  auto after = [this, bucket_name = call.request.bucket, key = call.request.key, operation,
                acl = std::move(acl)](const Response& response) {
    std::shared_ptr<Bucket> bucket;
    {
      std::lock_guard lock(mutex_);
      const auto it = buckets_.find(bucket_name);
      if (it == buckets_.end()) return;
      bucket = it->second;
    }
    if (operation == Operation::kCreateBucket) {
      store_access_setting(*bucket, "acl", encode_acl(acl));
      return;
    }
    const std::string version = header_of(response, "x-amz-version-id");
    std::lock_guard lock(mutex_);
    const auto object = metadata_.object(bucket_name, key, version);
    if (object) access_store_.set_object_acl(bucket_name, key, object->version_id, object->modified_ns, encode_acl(acl));
  };
  if (exchange.body) {
    exchange.body = std::make_unique<ThenBody>(std::move(exchange.body), std::move(after));
  } else if (exchange.response.status == 200) {
    after(exchange.response);
  }
  return exchange;
}

Response S3Api::get_bucket_acl(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  std::lock_guard lock(mutex_);
  const auto& rules = *bucket->rules;
  const Acl owner_only = canned_acl("private", bucket->record.owner, bucket->record.owner);
  return xml_response(acl_document(rules.acls_disabled() ? owner_only : rules.acl.value_or(owner_only)));
}

// The ACL a PutBucketAcl or PutObjectAcl sets: from headers or the body, checked against the bucket's rules.
Acl S3Api::acl_to_put(const S3Request& request, const Bucket& bucket, const std::string& owner,
                      const std::string& body) {
  std::shared_ptr<const BucketAccessRules> rules;
  {
    std::lock_guard lock(mutex_);
    rules = bucket.rules;
  }
  const RequestedAcl from_headers = acl_from_headers(request, owner, bucket.record.owner, config_.users);
  if (from_headers.given && !body.empty()) {
    throw S3Error("UnexpectedContent", "give the ACL in headers or in the body, not both");
  }
  if (!from_headers.given && body.empty()) throw S3Error("MalformedACLError", "the request names no ACL");
  Acl acl = from_headers.given ? from_headers.acl : parse_acl_document(body, config_.users);
  if (rules->acls_disabled() && acl != canned_acl("private", acl.owner, acl.owner)) {
    throw S3Error("AccessControlListNotSupported", "the bucket does not allow ACLs (BucketOwnerEnforced)");
  }
  if (rules->block().block_public_acls && acl_is_public(acl)) {
    throw S3Error("AccessDenied", "the bucket's public access block refuses public ACLs");
  }
  return acl;
}

std::unique_ptr<RequestBody> S3Api::put_bucket_acl(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket, request = call.request](const std::string& body) {
    store_access_setting(*bucket, "acl", encode_acl(acl_to_put(request, *bucket, bucket->record.owner, body)));
    return Response{};
  });
}

Response S3Api::get_object_acl(const Call& call) {
  const auto bucket = bucket_for(call, Access::kRead);
  const ObjectRecord version = target_version(call, *bucket);
  bool disabled;
  {
    std::lock_guard lock(mutex_);
    disabled = bucket->rules->acls_disabled();
  }
  Response r = xml_response(acl_document(disabled ? canned_acl("private", bucket->record.owner, bucket->record.owner)
                                                  : object_acl(*bucket, version)));
  std::lock_guard lock(mutex_);
  add_version_header(r, !bucket->record.versioning.empty(), version.version_id);
  return r;
}

std::unique_ptr<RequestBody> S3Api::put_object_acl(const Call& call) {
  const auto bucket = bucket_for(call, Access::kWrite);
  const ObjectRecord version = target_version(call, *bucket);
  return small_body(call, [this, bucket, version, request = call.request](const std::string& body) {
    const Acl acl = acl_to_put(request, *bucket, owner_of(*bucket, version), body);
    Response r;
    std::lock_guard lock(mutex_);
    access_store_.set_object_acl(bucket->record.name, version.key, version.version_id, version.modified_ns,
                                 encode_acl(acl));
    add_version_header(r, !bucket->record.versioning.empty(), version.version_id);
    return r;
  });
}

// Also GetBucketPolicyStatus (?policyStatus): public as Ceph RGW judges it, which is what S3's
// conformance tests expect: the policy lets everyone in (PublicAccessBlock's notion), or the
// bucket's ACL grants AllUsers or AuthenticatedUsers anything. A bucket without a policy is
// answered too (not public).
Response S3Api::get_bucket_policy(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  std::lock_guard lock(mutex_);
  const BucketAccessRules& rules = *bucket->rules;
  if (call.request.has_query("policyStatus")) {
    const bool by_policy = rules.policy && rules.policy->is_public();
    const bool by_acl = !rules.acls_disabled() && rules.acl && acl_is_public(*rules.acl);
    XmlWriter xml;
    xml.open("PolicyStatus", kS3Namespace).element("IsPublic", by_policy || by_acl ? "true" : "false");
    return xml_response(xml.finish());
  }
  if (bucket->rules->policy_json.empty()) {
    throw S3Error("NoSuchBucketPolicy", "the bucket '" + bucket->record.name + "' has no policy");
  }
  Response r;
  r.body = bucket->rules->policy_json;
  r.headers.emplace_back("content-type", "application/json");
  return r;
}

std::unique_ptr<RequestBody> S3Api::put_bucket_policy(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    const BucketPolicy policy = BucketPolicy::parse(body, bucket->record.name, config_.users);
    bool block_public;
    {
      std::lock_guard lock(mutex_);
      block_public = bucket->rules->block().block_public_policy;
    }
    if (block_public && policy.is_public()) {
      throw S3Error("AccessDenied", "the bucket's public access block refuses a public policy");
    }
    store_access_setting(*bucket, "policy", body);
    Response r;
    r.status = 204;
    return r;
  });
}

Response S3Api::delete_bucket_setting(const Call& call, const std::string& name) {
  const auto bucket = bucket_for(call, Access::kOwner);
  store_access_setting(*bucket, name, "");
  Response r;
  r.status = 204;
  return r;
}

Response S3Api::get_ownership_controls(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  std::lock_guard lock(mutex_);
  if (bucket->rules->ownership.empty()) {
    throw S3Error("OwnershipControlsNotFoundError", "the bucket '" + bucket->record.name + "' has no ownership controls");
  }
  XmlWriter xml;
  xml.open("OwnershipControls", kS3Namespace).open("Rule").element("ObjectOwnership", bucket->rules->ownership);
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::put_ownership_controls(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    const auto tree = read_xml_body(body);
    const std::string ownership = xml_value(tree, "OwnershipControls.Rule.ObjectOwnership");
    if (!is_object_ownership(ownership)) {
      throw S3Error("MalformedXML",
                    "ObjectOwnership must be " + std::string(kObjectOwnershipChoices) + ", not '" + ownership + "'");
    }
    store_access_setting(*bucket, "ownership", ownership);
    return Response{};
  });
}

Response S3Api::get_bucket_cors(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  std::lock_guard lock(mutex_);
  if (!bucket->rules->cors) {
    throw S3Error("NoSuchCORSConfiguration", "The CORS configuration does not exist");
  }
  return xml_response(bucket->rules->cors->to_xml());
}

std::unique_ptr<RequestBody> S3Api::put_bucket_cors(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    // Stored as it parses back: what GetBucketCors shows is what applies.
    store_access_setting(*bucket, "cors", CorsConfiguration::parse(body).to_xml());
    return Response{};
  });
}

Response S3Api::get_bucket_encryption(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  std::string configuration;
  {
    std::lock_guard lock(mutex_);
    configuration = access_store_.setting(bucket->record.name, "encryption");
  }
  if (configuration.empty()) {
    throw S3Error("ServerSideEncryptionConfigurationNotFoundError",
                  "The server side encryption configuration was not found");
  }
  return xml_response(configuration);
}

std::unique_ptr<RequestBody> S3Api::put_bucket_encryption(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    const std::string configuration = encryption_configuration(body, keys_);
    if (default_encryption(configuration).algorithm == "AES256" && !encrypted_at_rest(bucket->record.name) &&
        !keys_.master()) {
      throw unencrypted_bucket(bucket->record.name, "default encryption");
    }
    store_access_setting(*bucket, "encryption", configuration);
    return Response{};
  });
}

bool S3Api::encrypted_at_rest(const std::string& bucket) {
  std::lock_guard lock(mutex_);
  const auto it = buckets_.find(bucket);
  return it != buckets_.end() && it->second->encrypted_at_rest();
}

ObjectEncryption S3Api::write_encryption(const S3Request& request, const Bucket& bucket) {
  // A dedupe bucket's repository keeps SSE-S3's promise already.
  const bool seals_sse_s3 = keys_.master() && !bucket.encrypted_at_rest();
  DefaultEncryption by_default;
  if (seals_sse_s3 || keys_.has_kms()) {  // else no default can change what is written
    std::string configuration;
    {
      std::lock_guard lock(mutex_);
      configuration = access_store_.setting(bucket.record.name, "encryption");
    }
    by_default = default_encryption(configuration);
  }
  return encryption_for_write(request, keys_, seals_sse_s3, by_default);
}

std::shared_ptr<const BucketAccessRules> S3Api::rules_of(const std::string& bucket) {
  std::lock_guard lock(mutex_);
  const auto it = buckets_.find(bucket);
  return it == buckets_.end() ? nullptr : it->second->rules;
}

Response S3Api::preflight(const S3Request& request) {
  const std::string origin = request.header("origin");
  if (origin.empty()) throw S3Error("BadRequest", "Insufficient information. Origin request header needed.");
  const auto rules = rules_of(request.bucket);
  if (!rules || !rules->cors) throw S3Error("AccessForbidden", "CORSResponse: CORS is not enabled for this bucket.");
  const std::string method = request.header("access-control-request-method");
  if (method.empty()) {
    throw S3Error("BadRequest", "Insufficient information. Access-Control-Request-Method request header needed.");
  }
  const auto headers = requested_headers(request.header("access-control-request-headers"));
  const CorsRule* rule = rules->cors->match(origin, method, headers);
  if (!rule) {
    throw S3Error("AccessForbidden", "CORSResponse: This CORS request is not allowed: no rule of the bucket lets "
                                     "origin '" + origin + "' use " + method + " with these headers.");
  }
  Response r;
  r.headers = cors_headers(*rule, origin, true, headers);
  return r;
}

NameValues S3Api::cors_response_headers(const S3Request& request) {
  const std::string origin = request.header("origin");
  if (origin.empty() || request.bucket.empty()) return {};
  const auto rules = rules_of(request.bucket);
  if (!rules || !rules->cors) return {};
  // The method asked about, as Ceph RGW reads it, else the request's own.
  std::string method = request.header("access-control-request-method");
  if (method.empty()) method = request.method;
  const CorsRule* rule = rules->cors->match(origin, method);
  return rule ? cors_headers(*rule, origin, false) : NameValues{};
}

Response S3Api::get_public_access_block(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  std::lock_guard lock(mutex_);
  if (!bucket->rules->public_access_block) {
    throw S3Error("NoSuchPublicAccessBlockConfiguration",
                  "the bucket '" + bucket->record.name + "' has no public access block");
  }
  const PublicAccessBlock b = *bucket->rules->public_access_block;
  const bool flags[] = {b.block_public_acls, b.ignore_public_acls, b.block_public_policy, b.restrict_public_buckets};
  XmlWriter xml;
  xml.open("PublicAccessBlockConfiguration", kS3Namespace);
  for (size_t i = 0; i < kBlockNames.size(); ++i) xml.element(kBlockNames[i], flags[i]);
  return xml_response(xml.finish());
}

std::unique_ptr<RequestBody> S3Api::put_public_access_block(const Call& call) {
  const auto bucket = bucket_for(call, Access::kOwner);
  return small_body(call, [this, bucket](const std::string& body) {
    const auto tree = read_xml_body(body);
    const auto root = tree.get_child_optional("PublicAccessBlockConfiguration");
    if (!root) throw S3Error("MalformedXML", "the body is not a <PublicAccessBlockConfiguration> document");
    bool flags[4];
    for (size_t i = 0; i < kBlockNames.size(); ++i) {
      const std::string value = xml_value(*root, std::string(kBlockNames[i]), "false");
      if (value != "true" && value != "false") {
        throw S3Error("MalformedXML", std::string(kBlockNames[i]) + " must be true or false");
      }
      flags[i] = value == "true";
    }
    store_access_setting(*bucket, "public_access_block", encode_block({flags[0], flags[1], flags[2], flags[3]}));
    return Response{};
  });
}

}  // namespace keel::gateway
