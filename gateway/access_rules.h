// A bucket's access settings beyond the configuration's owner and grants, as
// S3 clients set them: ACL, bucket policy, ownership controls and public
// access block (stored in access_store.h, applied by S3Api::authorize), and its
// CORS configuration (answered by S3Api::begin).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gateway/acl.h"
#include "gateway/bucket_policy.h"
#include "gateway/cors.h"

namespace keel::gateway {

struct PublicAccessBlock {
  bool block_public_acls = false;
  bool ignore_public_acls = false;
  bool block_public_policy = false;
  bool restrict_public_buckets = false;
};

// S3's ObjectOwnership settings, as CreateBucket's header and PutBucketOwnershipControls take them.
inline constexpr std::string_view kObjectOwnershipChoices = "BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter";
inline bool is_object_ownership(std::string_view value) {
  return value == "BucketOwnerEnforced" || value == "BucketOwnerPreferred" || value == "ObjectWriter";
}

struct BucketAccessRules {
  std::optional<Acl> acl;  // none: the owner's FULL_CONTROL only
  std::string policy_json;  // as put; empty when there is none
  std::optional<BucketPolicy> policy;
  std::string ownership;  // "", "BucketOwnerEnforced", "BucketOwnerPreferred" or "ObjectWriter"
  std::optional<PublicAccessBlock> public_access_block;
  std::optional<CorsConfiguration> cors;

  // BucketOwnerEnforced: ACLs are disabled and grant nothing.
  bool acls_disabled() const { return ownership == "BucketOwnerEnforced"; }
  // S3's object ownership: who owns what `writer` (empty: an anonymous request) writes with
  // the canned ACL `canned_acl` (x-amz-acl) into a bucket `bucket_owner` owns. The writer, but
  // the bucket's owner under BucketOwnerEnforced, under BucketOwnerPreferred when the write
  // gives the bucket's owner full control, and for anonymous writes.
  const std::string& owner_for_write(const std::string& writer, const std::string& canned_acl,
                                     const std::string& bucket_owner) const {
    const bool preferred = ownership == "BucketOwnerPreferred" && canned_acl == "bucket-owner-full-control";
    return writer.empty() || acls_disabled() || preferred ? bucket_owner : writer;
  }
  // The owner S3 shows for a version `owner` wrote (empty: written before owners were
  // kept): under BucketOwnerEnforced every object is the bucket's owner's.
  const std::string& shown_owner(const std::string& owner, const std::string& bucket_owner) const {
    return owner.empty() || acls_disabled() ? bucket_owner : owner;
  }
  PublicAccessBlock block() const { return public_access_block.value_or(PublicAccessBlock{}); }
};

}  // namespace keel::gateway
