#include "gateway/acl.h"

#include <boost/property_tree/ptree.hpp>

#include <algorithm>
#include <array>
#include <ranges>
#include <utility>

#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "gateway/xml_reader.h"
#include "util/bytes.h"
#include "util/digest.h"
#include "util/text.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr std::string_view kAllUsersUri = "http://acs.amazonaws.com/groups/global/AllUsers";
constexpr std::string_view kAuthenticatedUri = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
// Element names no S3 document uses, replaced by <Grantee xsi:type=...> once written.
constexpr std::string_view kUserGrantee = "KeelGranteeCanonicalUser";
constexpr std::string_view kGroupGrantee = "KeelGranteeGroup";

struct PermissionName {
  Permission permission;
  std::string_view name;    // in documents
  std::string_view header;  // x-amz-grant-...
};
constexpr std::array kPermissions = {
    PermissionName{Permission::kRead, "READ", "x-amz-grant-read"},
    PermissionName{Permission::kWrite, "WRITE", "x-amz-grant-write"},
    PermissionName{Permission::kReadAcp, "READ_ACP", "x-amz-grant-read-acp"},
    PermissionName{Permission::kWriteAcp, "WRITE_ACP", "x-amz-grant-write-acp"},
    PermissionName{Permission::kFullControl, "FULL_CONTROL", "x-amz-grant-full-control"},
};

std::string_view permission_name(Permission permission) {
  for (const auto& p : kPermissions) {
    if (p.permission == permission) return p.name;
  }
  return "READ";
}

Grant owner_grant(const std::string& owner) { return {Grant::To::kUser, owner, Permission::kFullControl}; }

std::string user_by_canonical_id(std::string_view id, const std::vector<User>& users) {
  for (const auto& user : users) {
    // The user's name is taken too, for clients configured with it.
    if (canonical_id(user.name) == id || user.name == id) return user.name;
  }
  throw S3Error("InvalidArgument", "no user has the canonical id '" + std::string(id) + "'");
}

Grant::To group_of(std::string_view uri) {
  if (uri == kAllUsersUri) return Grant::To::kAllUsers;
  if (uri == kAuthenticatedUri) return Grant::To::kAuthenticatedUsers;
  throw S3Error("InvalidArgument", "the group '" + std::string(uri) + "' is not AllUsers or AuthenticatedUsers");
}

// The user a grant by e-mail address names (the `email` of its [user:NAME]); S3 answers an
// address of no account with UnresolvableGrantByEmailAddress.
std::string user_by_email(const std::string& email, const std::vector<User>& users) {
  const std::string wanted = ascii_lower(email);
  for (const auto& user : users) {
    if (!user.email.empty() && ascii_lower(user.email) == wanted) return user.name;
  }
  throw S3Error("UnresolvableGrantByEmailAddress", "the e-mail address '" + email + "' names no user");
}

}  // namespace

std::string canonical_id(std::string_view user_name) {
  Digest digest(DigestAlgorithm::kSha256);
  digest.update(as_bytes(user_name));
  return to_hex(digest.finish());
}

void user_element(XmlWriter& xml, std::string_view name, const std::string& user) {
  xml.open(name).element("ID", canonical_id(user)).element("DisplayName", user).close();
}

Acl canned_acl(std::string_view name, const std::string& owner, const std::string& bucket_owner) {
  Acl acl{owner, {owner_grant(owner)}};
  if (name == "private") return acl;
  if (name == "public-read") {
    acl.grants.push_back({Grant::To::kAllUsers, "", Permission::kRead});
  } else if (name == "public-read-write") {
    acl.grants.push_back({Grant::To::kAllUsers, "", Permission::kRead});
    acl.grants.push_back({Grant::To::kAllUsers, "", Permission::kWrite});
  } else if (name == "authenticated-read") {
    acl.grants.push_back({Grant::To::kAuthenticatedUsers, "", Permission::kRead});
  } else if (name == "bucket-owner-read" || name == "bucket-owner-full-control") {
    if (bucket_owner != owner) {
      acl.grants.push_back({Grant::To::kUser, bucket_owner,
                            name == "bucket-owner-read" ? Permission::kRead : Permission::kFullControl});
    }
  } else {
    throw S3Error("InvalidArgument", "x-amz-acl '" + std::string(name) + "' is not a canned ACL");
  }
  return acl;
}

RequestedAcl acl_from_headers(const S3Request& request, const std::string& owner, const std::string& bucket_owner,
                              const std::vector<User>& users) {
  RequestedAcl out;
  if (request.has_header("x-amz-acl")) {
    out.given = true;
    out.acl = canned_acl(request.header("x-amz-acl"), owner, bucket_owner);
  }
  Acl explicit_acl{owner, {}};
  for (const auto& p : kPermissions) {
    for (const auto& [name, value] : request.headers) {
      if (name != p.header) continue;
      // id="...", uri="...", emailAddress="..." separated by commas; S3 also
      // takes the value unquoted (id=...).
      for (const auto item : std::views::split(std::string_view(value), ',')) {
        const std::string grantee(trim_blanks(std::string_view(item.begin(), item.end())));
        const size_t eq = grantee.find('=');
        std::string_view id_view;
        if (eq != std::string::npos) id_view = trim_blanks(std::string_view(grantee).substr(eq + 1));
        if (id_view.size() >= 2 && id_view.front() == '"' && id_view.back() == '"') {
          id_view = id_view.substr(1, id_view.size() - 2);
        }
        if (id_view.empty() || id_view.find('"') != std::string_view::npos) {
          throw S3Error("InvalidArgument", std::string(p.header) + ": '" + grantee + "' is not id=\"...\", uri=\"...\" or emailAddress=\"...\"");
        }
        const std::string kind(trim_blanks(std::string_view(grantee).substr(0, eq)));
        const std::string id(id_view);
        if (kind == "id") {
          explicit_acl.grants.push_back({Grant::To::kUser, user_by_canonical_id(id, users), p.permission});
        } else if (kind == "uri") {
          explicit_acl.grants.push_back({group_of(id), "", p.permission});
        } else if (kind == "emailAddress") {
          explicit_acl.grants.push_back({Grant::To::kUser, user_by_email(id, users), p.permission});
        } else {
          throw S3Error("InvalidArgument", std::string(p.header) + ": grantees by " + kind + " are not supported");
        }
      }
    }
  }
  if (!explicit_acl.grants.empty()) {
    if (out.given) throw S3Error("InvalidRequest", "specify either x-amz-acl or x-amz-grant-* headers, not both");
    out.given = true;
    out.acl = std::move(explicit_acl);
  }
  return out;
}

std::string acl_document(const Acl& acl) {
  XmlWriter xml;
  xml.open("AccessControlPolicy", kS3Namespace);
  user_element(xml, "Owner", acl.owner);
  xml.open("AccessControlList");
  // S3 gives the order no meaning; conformance suites compare it with RGW's,
  // which lists group grants first, then users by id (its grants are a map by
  // grantee). Users by name here: the suites' "alt" before "main", as there.
  std::vector<const Grant*> ordered;
  for (const auto& grant : acl.grants) ordered.push_back(&grant);
  std::stable_sort(ordered.begin(), ordered.end(), [](const Grant* a, const Grant* b) {
    return std::pair(a->to == Grant::To::kUser, a->user) < std::pair(b->to == Grant::To::kUser, b->user);
  });
  for (const Grant* listed : ordered) {
    const Grant& grant = *listed;
    xml.open("Grant");
    if (grant.to == Grant::To::kUser) {
      xml.open(kUserGrantee).element("ID", canonical_id(grant.user)).element("DisplayName", grant.user);
    } else {
      xml.open(kGroupGrantee).element("URI", grant.to == Grant::To::kAllUsers ? kAllUsersUri : kAuthenticatedUri);
    }
    xml.close();
    xml.element("Permission", permission_name(grant.permission));
    xml.close();
  }
  // XmlWriter writes no attributes but a namespace: the Grantee's xsi:type goes in afterwards.
  std::string document = xml.finish();
  for (const auto& [placeholder, type] : {std::pair{kUserGrantee, "CanonicalUser"}, std::pair{kGroupGrantee, "Group"}}) {
    const std::string open = "<" + std::string(placeholder) + ">", close = "</" + std::string(placeholder) + ">";
    const std::string attributed =
        "<Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"" + std::string(type) + "\">";
    for (size_t at; (at = document.find(open)) != std::string::npos;) document.replace(at, open.size(), attributed);
    for (size_t at; (at = document.find(close)) != std::string::npos;) document.replace(at, close.size(), "</Grantee>");
  }
  return document;
}

Acl parse_acl_document(const std::string& body, const std::vector<User>& users) {
  const auto tree = read_xml_body(body);
  const auto policy = tree.get_child_optional("AccessControlPolicy");
  if (!policy) throw S3Error("MalformedACLError", "the body is not an AccessControlPolicy document");
  Acl acl;
  const std::string owner_id = xml_value(*policy, "Owner.ID");
  if (owner_id.empty()) throw S3Error("MalformedACLError", "the AccessControlPolicy has no Owner ID");
  acl.owner = user_by_canonical_id(owner_id, users);
  const auto list = policy->get_child_optional("AccessControlList");
  if (!list) return acl;
  for (const auto& [name, grant] : *list) {
    if (name != "Grant") continue;
    const std::string permission = xml_value(grant, "Permission");
    const auto known = std::find_if(kPermissions.begin(), kPermissions.end(),
                                    [&](const PermissionName& p) { return p.name == permission; });
    if (known == kPermissions.end()) throw S3Error("MalformedACLError", "unknown Permission '" + permission + "'");
    const std::string id = xml_value(grant, "Grantee.ID"), uri = xml_value(grant, "Grantee.URI");
    if (!id.empty()) {
      acl.grants.push_back({Grant::To::kUser, user_by_canonical_id(id, users), known->permission});
    } else if (!uri.empty()) {
      acl.grants.push_back({group_of(uri), "", known->permission});
    } else if (const std::string email = xml_value(grant, "Grantee.EmailAddress"); !email.empty()) {
      acl.grants.push_back({Grant::To::kUser, user_by_email(email, users), known->permission});
    } else {
      throw S3Error("MalformedACLError", "a Grantee needs an ID, a URI or an EmailAddress");
    }
  }
  return acl;
}

bool acl_allows(const Acl& acl, const std::string& user, Permission permission, bool ignore_public) {
  return std::any_of(acl.grants.begin(), acl.grants.end(), [&](const Grant& grant) {
    if (grant.permission != permission && grant.permission != Permission::kFullControl) return false;
    switch (grant.to) {
      case Grant::To::kUser: return !user.empty() && grant.user == user;
      case Grant::To::kAllUsers: return !ignore_public;
      case Grant::To::kAuthenticatedUsers: return !ignore_public && !user.empty();
    }
    return false;
  });
}

bool acl_is_public(const Acl& acl) {
  return std::any_of(acl.grants.begin(), acl.grants.end(),
                     [](const Grant& grant) { return grant.to != Grant::To::kUser; });
}

// "owner\ngrant\ngrant...", each grant "u:NAME:P", "a::P" or "t::P" with P the permission's index.
std::string encode_acl(const Acl& acl) {
  std::string out = acl.owner;
  for (const auto& grant : acl.grants) {
    const char to = grant.to == Grant::To::kUser ? 'u' : grant.to == Grant::To::kAllUsers ? 'a' : 't';
    out += "\n" + std::string(1, to) + ":" + std::to_string(static_cast<int>(grant.permission)) + ":" + grant.user;
  }
  return out;
}

Acl decode_acl(std::string_view text) {
  Acl acl;
  bool first = true;
  for (const auto piece : std::views::split(text, '\n')) {
    const std::string_view line(piece.begin(), piece.end());
    if (std::exchange(first, false)) {
      acl.owner = line;
      continue;
    }
    if (line.size() < 4) continue;
    const Grant::To to = line[0] == 'u' ? Grant::To::kUser : line[0] == 'a' ? Grant::To::kAllUsers
                                                                              : Grant::To::kAuthenticatedUsers;
    acl.grants.push_back({to, std::string(line.substr(4)), static_cast<Permission>(line[2] - '0')});
  }
  return acl;
}

}  // namespace keel::gateway
