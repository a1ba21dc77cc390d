// S3 access control lists mapped onto the gateway's users: canned ACLs
// (x-amz-acl), explicit grants (x-amz-grant-* headers or an
// AccessControlPolicy document) to a user by canonical id, to everyone
// (AllUsers) or to every signed-in user (AuthenticatedUsers); a user may also be named by the
// e-mail address its configuration gives. A user's
// canonical id is the hex SHA-256 of its name; its display name is the name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gateway/config.h"
#include "gateway/request.h"
#include "util/xml.h"

namespace keel::gateway {

enum class Permission { kRead, kWrite, kReadAcp, kWriteAcp, kFullControl };

struct Grant {
  enum class To { kUser, kAllUsers, kAuthenticatedUsers };
  To to = To::kUser;
  std::string user;  // kUser: the user's name
  Permission permission = Permission::kRead;
  bool operator==(const Grant&) const = default;
};

struct Acl {
  std::string owner;  // user name
  std::vector<Grant> grants;
  bool operator==(const Acl&) const = default;
};

// The 64-hex canonical id S3 clients see for a user.
std::string canonical_id(std::string_view user_name);

// Writes <name><ID>canonical id</ID><DisplayName>user</DisplayName></name>,
// the form of every Owner and Initiator S3 sends.
void user_element(XmlWriter& xml, std::string_view name, const std::string& user);

// "private", "public-read", "public-read-write", "authenticated-read",
// "bucket-owner-read", "bucket-owner-full-control" (the owner always has
// FULL_CONTROL). `bucket_owner` matters for the bucket-owner-* ones.
// Throws S3Error InvalidArgument for another name.
Acl canned_acl(std::string_view name, const std::string& owner, const std::string& bucket_owner);

// The ACL a request's x-amz-acl or x-amz-grant-* headers ask for (both:
// InvalidRequest); nullopt-like empty owner when it has none. Grants name users by
// id="canonical id" or emailAddress="the user's email", groups by
// uri="http://acs.amazonaws.com/groups/global/AllUsers"; an unknown id is
// InvalidArgument, an unknown address UnresolvableGrantByEmailAddress.
struct RequestedAcl {
  bool given = false;
  Acl acl;
};
RequestedAcl acl_from_headers(const S3Request& request, const std::string& owner, const std::string& bucket_owner,
                              const std::vector<User>& users);

// The AccessControlPolicy document of GetBucketAcl/GetObjectAcl, and its
// parser for PutBucketAcl/PutObjectAcl (MalformedACLError; InvalidArgument
// for an unknown grantee). A grantee by EmailAddress is kept as the user it names.
std::string acl_document(const Acl& acl);
Acl parse_acl_document(const std::string& body, const std::vector<User>& users);

// Whether the ACL grants `permission` (FULL_CONTROL grants all) to `user`
// (empty: an anonymous request). `ignore_public`: grants to AllUsers and
// AuthenticatedUsers count for nothing (PublicAccessBlock IgnorePublicAcls).
bool acl_allows(const Acl& acl, const std::string& user, Permission permission, bool ignore_public);
// Whether it grants anything to AllUsers or AuthenticatedUsers.
bool acl_is_public(const Acl& acl);

// Compact text form for the metadata store, and back.
std::string encode_acl(const Acl& acl);
Acl decode_acl(std::string_view text);

}  // namespace keel::gateway
