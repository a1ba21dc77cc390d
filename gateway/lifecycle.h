// A bucket's lifecycle configuration (Put/Get/DeleteBucketLifecycle): its
// rules as S3 validates them, and what they decide about one version or
// upload. The gateway carries the rules out itself (S3Api::sweep_lifecycle):
// Expiration (Days, Date, ExpiredObjectDeleteMarker),
// NoncurrentVersionExpiration (NoncurrentDays, NewerNoncurrentVersions) and
// AbortIncompleteMultipartUpload. Transitions are refused: keel has one
// storage class (docs/gateway.md, "Lifecycle").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gateway/metadata.h"
#include "gateway/request.h"

namespace keel::gateway {

// Which objects a rule applies to: all of its conditions hold.
struct LifecycleFilter {
  std::string prefix;
  NameValues tags;  // each must be among the object's tags
  std::optional<uint64_t> size_greater_than, size_less_than;
  // How GetBucketLifecycle shows it: the rule's own <Prefix> (the older form)
  // as sent, or <Filter> holding one condition or an <And> of several.
  bool legacy_prefix = false;
  bool uses_and = false;

  bool matches(const std::string& key, const NameValues& object_tags, uint64_t size) const;
};

struct LifecycleRule {
  std::string id;
  bool enabled = false;
  LifecycleFilter filter;
  std::optional<int> expiration_days;
  std::optional<int64_t> expiration_date_ns;  // midnight UTC
  bool expired_object_delete_marker = false;
  std::optional<int> noncurrent_days;
  std::optional<int> newer_noncurrent_versions;
  std::optional<int> abort_days;  // AbortIncompleteMultipartUpload's DaysAfterInitiation
};

// When a rule acts on something, and which rule.
struct LifecycleDue {
  int64_t at_ns = 0;
  std::string rule_id;
};

// The lifecycle clock: a day is 86400 s, and a number of days after a moment
// ends at the midnight UTC after it, as S3 rounds. A shorter debug day (for
// tests, as RGW's rgw_lc_debug_interval) is not rounded.
struct LifecycleDay {
  int64_t day_ns = 86'400'000'000'000;
  int64_t after(int64_t start_ns, int days) const;
};

class LifecycleConfiguration {
 public:
  // Reads a <LifecycleConfiguration> body as S3 validates it: MalformedXML
  // (not the document, a Status other than Enabled/Disabled, a malformed
  // date, <And> with fewer than two conditions, a rule with neither Prefix
  // nor Filter, ExpiredObjectDeleteMarker with Days or Date), InvalidArgument
  // (an ID over 255 characters, IDs repeated, Days, NoncurrentDays or
  // DaysAfterInitiation not positive, a Date not at midnight UTC, Days with
  // Date, a rule without an action, Prefix with Filter, two filter prefixes
  // no key starts with both, more than 1000 rules),
  // InvalidRequest (a tag filter with AbortIncompleteMultipartUpload or
  // ExpiredObjectDeleteMarker), InvalidStorageClass (a transition: keel has
  // STANDARD only). A rule without an ID gets a generated one.
  static LifecycleConfiguration parse(const std::string& xml);
  std::string to_xml() const;

  const std::vector<LifecycleRule>& rules() const { return rules_; }

  // When the current version `object` expires (x-amz-expiration): the
  // earliest Days or Date of the enabled rules that match it; nullopt when
  // none does or it is a delete marker.
  std::optional<LifecycleDue> expiration(const ObjectRecord& object, const LifecycleDay& day) const;
  // When an upload of `key` started at initiated_ns is aborted (x-amz-abort-date).
  std::optional<LifecycleDue> abort_date(const std::string& key, int64_t initiated_ns, const LifecycleDay& day) const;

  // The key prefixes the enabled rules that act on versions (or, `uploads`,
  // on multipart uploads) can touch, none inside another, in order; {""} when
  // one covers the whole bucket, {} when none. The sweep lists only these.
  std::vector<std::string> prefixes(bool uploads) const;

 private:
  std::vector<LifecycleRule> rules_;
};

// What the lifecycle rules do to one version of a key, seen in the key's
// order of versions (newest first).
struct VersionPlace {
  bool current = false;
  bool only_version = false;  // the key has no other version
  int64_t noncurrent_since_ns = 0;  // not current: when the next newer version was written
  int newer_noncurrent = 0;  // not current: noncurrent versions newer than this one
};

enum class LifecycleAction {
  kNone,
  kExpireCurrent,       // a versioned bucket gets a delete marker; an unversioned one loses the object
  kRemoveDeleteMarker,  // an expired object delete marker
  kRemoveNoncurrent,
};

// The action the enabled rules of `config` call for on `version` at now_ns.
LifecycleAction lifecycle_action(const LifecycleConfiguration& config, const ObjectRecord& version,
                                 const VersionPlace& place, const LifecycleDay& day, int64_t now_ns);

// The x-amz-expiration header's value: expiry-date="<RFC 1123 date>", rule-id="<id>".
std::string expiration_header(const LifecycleDue& due);

}  // namespace keel::gateway
