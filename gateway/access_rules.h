// A bucket's access settings beyond the configuration's owner and grants, as
// S3 clients set them: ACL, bucket policy, ownership controls and public
// access block (stored in access_store.h, applied by S3Api::authorize).
#pragma once

#include <optional>
#include <string>

#include "gateway/acl.h"
#include "gateway/bucket_policy.h"

namespace keel::gateway {

struct PublicAccessBlock {
  bool block_public_acls = false;
  bool ignore_public_acls = false;
  bool block_public_policy = false;
  bool restrict_public_buckets = false;
};

struct BucketAccessRules {
  std::optional<Acl> acl;  // none: the owner's FULL_CONTROL only
  std::string policy_json;  // as put; empty when there is none
  std::optional<BucketPolicy> policy;
  std::string ownership;  // "", "BucketOwnerEnforced", "BucketOwnerPreferred" or "ObjectWriter"
  std::optional<PublicAccessBlock> public_access_block;

  // BucketOwnerEnforced: ACLs are disabled and grant nothing.
  bool acls_disabled() const { return ownership == "BucketOwnerEnforced"; }
  PublicAccessBlock block() const { return public_access_block.value_or(PublicAccessBlock{}); }
};

}  // namespace keel::gateway
