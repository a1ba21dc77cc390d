#include "gateway/lifecycle.h"

#include <algorithm>
#include <set>

#include "gateway/exchange.h"
#include "gateway/object_lock.h"
#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "gateway/xml_reader.h"
#include "util/id.h"
#include "util/xml.h"

namespace keel::gateway {

namespace pt = boost::property_tree;

namespace {

constexpr size_t kMaxLifecycleRules = 1000;
constexpr size_t kMaxIdLength = 255;
constexpr int64_t kNsPerSecond = 1'000'000'000;
constexpr int64_t kRealDayNs = 86'400 * kNsPerSecond;

[[noreturn]] void malformed_lifecycle(const std::string& why) {
  throw S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate against our published "
                                "schema: " + why);
}

int count_children(const pt::ptree& tree, const std::string& name) {
  return static_cast<int>(std::count_if(tree.begin(), tree.end(), [&](const auto& c) { return c.first == name; }));
}

// A whole number element; MalformedXML when it is not one.
std::optional<int64_t> number(const pt::ptree& tree, const std::string& name) {
  if (!tree.get_child_optional(name)) return std::nullopt;
  const std::string text = xml_value(tree, name);
  const bool negative = text.starts_with('-');
  const std::string digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos) {
    malformed_lifecycle("<" + name + "> must be a whole number, not '" + text + "'");
  }
  const int64_t value = std::stoll(digits);
  return negative ? -value : value;
}

// A count of days (or versions) that must be positive: InvalidArgument otherwise.
std::optional<int> positive(const pt::ptree& tree, const std::string& name, const std::string& action,
                            int64_t max = 2'147'483'647) {
  const auto value = number(tree, name);
  if (!value) return std::nullopt;
  if (*value <= 0 || *value > max) {
    throw S3Error("InvalidArgument", "'" + name + "' for " + action + " action must be a positive integer" +
                                         (max < 2'147'483'647 ? " up to " + std::to_string(max) : ""));
  }
  return static_cast<int>(*value);
}

NameValues tag_of(const pt::ptree& tag) {
  const auto key = tag.get_child_optional("Key");
  if (!key) malformed_lifecycle("a <Tag> without a <Key>");
  // Tag keys and values are any text: kept as sent, as object tags are.
  return {{key->data(), tag.get<std::string>("Value", "")}};
}

// A second <Prefix> narrows the first: a key must start with both.
void add_prefix(LifecycleFilter& filter, const std::string& prefix) {
  if (filter.prefix.starts_with(prefix)) return;
  if (!prefix.starts_with(filter.prefix)) {
    throw S3Error("InvalidArgument", "a lifecycle filter's prefixes '" + filter.prefix + "' and '" + prefix +
                                         "' can match no key together");
  }
  filter.prefix = prefix;
}

// The conditions of <Filter> or its <And> into `filter`.
void read_conditions(const pt::ptree& tree, LifecycleFilter& filter) {
  for (const auto& [name, child] : tree) {
    if (name == "Prefix") {
      add_prefix(filter, child.data());
    } else if (name == "Tag") {
      const auto tag = tag_of(child);
      filter.tags.insert(filter.tags.end(), tag.begin(), tag.end());
    } else if (name == "ObjectSizeGreaterThan") {
      const int64_t greater = *number(tree, name);
      if (greater < 0) throw S3Error("InvalidArgument", "'ObjectSizeGreaterThan' must not be negative");
      filter.size_greater_than = static_cast<uint64_t>(greater);
    } else if (name == "ObjectSizeLessThan") {
      const int64_t less = *number(tree, name);
      if (less <= 0) throw S3Error("InvalidArgument", "'ObjectSizeLessThan' must be a positive integer");
      filter.size_less_than = static_cast<uint64_t>(less);
    } else if (name != "And") {
      malformed_lifecycle("unknown element <" + name + "> in a lifecycle filter");
    }
  }
}

LifecycleFilter read_filter(const pt::ptree& rule) {
  LifecycleFilter filter;
  const auto own_prefix = rule.get_child_optional("Prefix");
  const auto element = rule.get_child_optional("Filter");
  if (own_prefix && element) {
    throw S3Error("InvalidArgument", "a rule takes <Prefix> or <Filter>, not both");
  }
  if (own_prefix) {
    filter.legacy_prefix = true;
    filter.prefix = own_prefix->data();
    return filter;
  }
  if (!element) malformed_lifecycle("a <Rule> needs a <Filter> (or the older <Prefix>)");
  if (count_children(*element, "And") > 1) malformed_lifecycle("a <Filter> holds one <And>");
  size_t conditions = element->size();
  if (const auto conjunction = element->get_child_optional("And")) {
    for (const auto& [name, child] : *conjunction) {
      if (name == "And") malformed_lifecycle("<And> inside <And>");
    }
    // As AWS: a single condition goes straight into <Filter>.
    if (conjunction->size() < 2) malformed_lifecycle("<And> combines two or more conditions");
    conditions += conjunction->size() - 1;
    read_conditions(*conjunction, filter);
  }
  // Several conditions beside <And> (or without it) are their conjunction too, as RGW
  // reads them: the ceph s3-tests tag cases send <Filter><Prefix/><Tag/></Filter>, which
  // AWS refuses. GetBucketLifecycle shows them in AWS's form, in one <And>.
  read_conditions(*element, filter);
  filter.uses_and = conditions > 1;
  if (filter.size_greater_than && filter.size_less_than && *filter.size_greater_than >= *filter.size_less_than) {
    throw S3Error("InvalidArgument", "'ObjectSizeLessThan' must be greater than 'ObjectSizeGreaterThan'");
  }
  std::set<std::string> keys;
  for (const auto& [key, value] : filter.tags) {
    if (!keys.insert(key).second) throw S3Error("InvalidArgument", "duplicate tag key '" + key + "' in a filter");
  }
  return filter;
}

void read_expiration(const pt::ptree& expiration, LifecycleRule& rule) {
  rule.expiration_days = positive(expiration, "Days", "Expiration");
  if (expiration.get_child_optional("Date")) {
    const std::string text = xml_value(expiration, "Date");
    const auto date = parse_iso8601(text);
    if (!date) malformed_lifecycle("<Date> must be an ISO 8601 date, not '" + text + "'");
    if (*date % kRealDayNs != 0) throw S3Error("InvalidArgument", "'Date' must be at midnight GMT");
    rule.expiration_date_ns = *date;
  }
  if (rule.expiration_days && rule.expiration_date_ns) {
    throw S3Error("InvalidArgument", "an Expiration takes Days or Date, not both");
  }
  if (expiration.get_child_optional("ExpiredObjectDeleteMarker")) {
    const std::string flag = xml_value(expiration, "ExpiredObjectDeleteMarker");
    if (flag != "true" && flag != "false") malformed_lifecycle("ExpiredObjectDeleteMarker must be true or false");
    if (rule.expiration_days || rule.expiration_date_ns) {
      malformed_lifecycle("ExpiredObjectDeleteMarker cannot be specified with Days or Date in a Lifecycle Expiration Policy");
    }
    rule.expired_object_delete_marker = flag == "true";
  }
  if (!rule.expiration_days && !rule.expiration_date_ns && !expiration.get_child_optional("ExpiredObjectDeleteMarker")) {
    malformed_lifecycle("an <Expiration> needs Days, Date or ExpiredObjectDeleteMarker");
  }
}

LifecycleRule read_rule(const pt::ptree& tree) {
  LifecycleRule rule;
  if (tree.get_child_optional("ID")) rule.id = tree.get<std::string>("ID");
  if (rule.id.size() > kMaxIdLength) throw S3Error("InvalidArgument", "ID length should not exceed allowed limit of 255");
  const std::string status = xml_value(tree, "Status");
  if (status != "Enabled" && status != "Disabled") {
    malformed_lifecycle("<Status> must be Enabled or Disabled, not '" + status + "'");
  }
  rule.enabled = status == "Enabled";
  rule.filter = read_filter(tree);
  if (count_children(tree, "Expiration") > 1) malformed_lifecycle("a rule holds one <Expiration>");
  if (const auto expiration = tree.get_child_optional("Expiration")) read_expiration(*expiration, rule);
  if (const auto noncurrent = tree.get_child_optional("NoncurrentVersionExpiration")) {
    rule.noncurrent_days = positive(*noncurrent, "NoncurrentDays", "NoncurrentVersionExpiration");
    rule.newer_noncurrent_versions =
        positive(*noncurrent, "NewerNoncurrentVersions", "NoncurrentVersionExpiration", 100);
    if (!rule.noncurrent_days) malformed_lifecycle("a <NoncurrentVersionExpiration> needs <NoncurrentDays>");
  }
  if (const auto abort = tree.get_child_optional("AbortIncompleteMultipartUpload")) {
    rule.abort_days = positive(*abort, "DaysAfterInitiation", "AbortIncompleteMultipartUpload");
    if (!rule.abort_days) malformed_lifecycle("an <AbortIncompleteMultipartUpload> needs <DaysAfterInitiation>");
  }
  if (tree.get_child_optional("Transition") || tree.get_child_optional("NoncurrentVersionTransition")) {
    // AWS's answer for a storage class it does not offer; keel stores everything as STANDARD.
    throw S3Error("InvalidStorageClass", "The storage class you specified is not valid: this server has only "
                                         "STANDARD, so lifecycle transitions are not supported");
  }
  for (const auto& [name, child] : tree) {
    static const std::set<std::string> kKnown = {"ID", "Status", "Prefix", "Filter", "Expiration",
                                                 "NoncurrentVersionExpiration", "AbortIncompleteMultipartUpload"};
    if (!kKnown.contains(name)) malformed_lifecycle("unknown element <" + name + "> in a <Rule>");
  }
  if (!rule.expiration_days && !rule.expiration_date_ns && !rule.expired_object_delete_marker &&
      !rule.noncurrent_days && !rule.abort_days) {
    // An ExpiredObjectDeleteMarker of false alone is no action either.
    throw S3Error("InvalidArgument", "At least one action needs to be specified in a rule");
  }
  if (!rule.filter.tags.empty() || rule.filter.size_greater_than || rule.filter.size_less_than) {
    if (rule.abort_days) {
      throw S3Error("InvalidRequest", "AbortIncompleteMultipartUpload cannot be specified with Tags or object size");
    }
    if (rule.expired_object_delete_marker) {
      throw S3Error("InvalidRequest", "ExpiredObjectDeleteMarker cannot be specified with Tags or object size");
    }
  }
  return rule;
}

void write_filter(XmlWriter& xml, const LifecycleFilter& f) {
  if (f.legacy_prefix) {
    xml.element("Prefix", f.prefix);
    return;
  }
  xml.open("Filter");
  if (f.uses_and) xml.open("And");
  if (f.uses_and || !f.prefix.empty() || (f.tags.empty() && !f.size_greater_than && !f.size_less_than)) {
    xml.element("Prefix", f.prefix);
  }
  for (const auto& [key, value] : f.tags) xml.open("Tag").element("Key", key).element("Value", value).close();
  if (f.size_greater_than) xml.element("ObjectSizeGreaterThan", *f.size_greater_than);
  if (f.size_less_than) xml.element("ObjectSizeLessThan", *f.size_less_than);
  if (f.uses_and) xml.close();
  xml.close();
}

}  // namespace

bool LifecycleFilter::matches(const std::string& key, const NameValues& object_tags, uint64_t size) const {
  if (!key.starts_with(prefix)) return false;
  if (size_greater_than && size <= *size_greater_than) return false;
  if (size_less_than && size >= *size_less_than) return false;
  return std::all_of(tags.begin(), tags.end(), [&](const auto& tag) {
    return std::find(object_tags.begin(), object_tags.end(), tag) != object_tags.end();
  });
}

int64_t LifecycleDay::after(int64_t start_ns, int days) const {
  const int64_t end = start_ns + days * day_ns;
  if (day_ns != kRealDayNs) return end;
  // S3 rounds up to the next midnight UTC.
  return (end / kRealDayNs + 1) * kRealDayNs;
}

LifecycleConfiguration LifecycleConfiguration::parse(const std::string& xml) {
  const auto tree = read_xml_body(xml);
  const auto root = tree.get_child_optional("LifecycleConfiguration");
  if (!root) malformed_lifecycle("the body is not a <LifecycleConfiguration> document");
  LifecycleConfiguration config;
  std::set<std::string> ids;
  for (const auto& [name, rule] : *root) {
    if (name != "Rule") malformed_lifecycle("unknown element <" + name + "> in <LifecycleConfiguration>");
    config.rules_.push_back(read_rule(rule));
    const std::string& id = config.rules_.back().id;
    if (!id.empty() && !ids.insert(id).second) throw S3Error("InvalidArgument", "Rule ID must be unique. Found same ID for more than one rule");
  }
  if (config.rules_.empty()) malformed_lifecycle("a <LifecycleConfiguration> needs at least one <Rule>");
  if (config.rules_.size() > kMaxLifecycleRules) throw S3Error("InvalidArgument", "a lifecycle configuration holds at most 1000 rules");
  for (auto& rule : config.rules_) {
    // As S3: a rule sent without an ID gets one.
    while (rule.id.empty()) {
      rule.id = Id::random().hex().substr(0, 48);
      if (!ids.insert(rule.id).second) rule.id.clear();
    }
  }
  return config;
}

std::string LifecycleConfiguration::to_xml() const {
  XmlWriter xml;
  xml.open("LifecycleConfiguration", kS3Namespace);
  for (const auto& r : rules_) {
    xml.open("Rule").element("ID", r.id);
    write_filter(xml, r.filter);
    xml.element("Status", r.enabled ? "Enabled" : "Disabled");
    if (r.expiration_days || r.expiration_date_ns || r.expired_object_delete_marker) {
      xml.open("Expiration");
      if (r.expiration_days) xml.element("Days", static_cast<uint64_t>(*r.expiration_days));
      if (r.expiration_date_ns) xml.element("Date", iso8601(*r.expiration_date_ns));
      if (r.expired_object_delete_marker) xml.element("ExpiredObjectDeleteMarker", true);
      xml.close();
    }
    if (r.noncurrent_days) {
      xml.open("NoncurrentVersionExpiration").element("NoncurrentDays", static_cast<uint64_t>(*r.noncurrent_days));
      if (r.newer_noncurrent_versions) {
        xml.element("NewerNoncurrentVersions", static_cast<uint64_t>(*r.newer_noncurrent_versions));
      }
      xml.close();
    }
    if (r.abort_days) {
      xml.open("AbortIncompleteMultipartUpload")
          .element("DaysAfterInitiation", static_cast<uint64_t>(*r.abort_days))
          .close();
    }
    xml.close();
  }
  return xml.finish();
}

std::optional<LifecycleDue> LifecycleConfiguration::expiration(const ObjectRecord& object,
                                                               const LifecycleDay& day) const {
  if (object.delete_marker) return std::nullopt;
  std::optional<LifecycleDue> earliest;
  for (const auto& r : rules_) {
    if (!r.enabled || !r.filter.matches(object.key, object.tags, object.size)) continue;
    std::optional<int64_t> at;
    if (r.expiration_days) at = day.after(object.modified_ns, *r.expiration_days);
    if (r.expiration_date_ns) at = std::max(*r.expiration_date_ns, object.modified_ns);
    if (at && (!earliest || *at < earliest->at_ns)) earliest = LifecycleDue{*at, r.id};
  }
  return earliest;
}

std::optional<LifecycleDue> LifecycleConfiguration::abort_date(const std::string& key, int64_t initiated_ns,
                                                               const LifecycleDay& day) const {
  std::optional<LifecycleDue> earliest;
  for (const auto& r : rules_) {
    if (!r.enabled || !r.abort_days || !key.starts_with(r.filter.prefix)) continue;
    const int64_t at = day.after(initiated_ns, *r.abort_days);
    if (!earliest || at < earliest->at_ns) earliest = LifecycleDue{at, r.id};
  }
  return earliest;
}

std::vector<std::string> LifecycleConfiguration::prefixes(bool uploads) const {
  std::vector<std::string> all;
  for (const auto& r : rules_) {
    const bool acts = uploads ? r.abort_days.has_value()
                              : r.expiration_days || r.expiration_date_ns || r.expired_object_delete_marker ||
                                    r.noncurrent_days;
    if (r.enabled && acts) all.push_back(r.filter.prefix);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::string> out;
  for (const auto& prefix : all) {
    // Sorted, a prefix inside an earlier one comes right after it (or after one inside it).
    if (out.empty() || !prefix.starts_with(out.back())) out.push_back(prefix);
  }
  return out;
}

LifecycleAction lifecycle_action(const LifecycleConfiguration& config, const ObjectRecord& version,
                                 const VersionPlace& place, const LifecycleDay& day, int64_t now_ns) {
  for (const auto& r : config.rules()) {
    if (!r.enabled || !r.filter.matches(version.key, version.tags, version.size)) continue;
    if (place.current && version.delete_marker) {
      // A Days rule also removes expired delete markers once they are as old
      // as it asks (AWS; RGW removes them at once).
      const bool old_enough = r.expiration_days && day.after(version.modified_ns, *r.expiration_days) <= now_ns;
      if (place.only_version && (r.expired_object_delete_marker || old_enough)) {
        return LifecycleAction::kRemoveDeleteMarker;
      }
      continue;
    }
    if (place.current) {
      const bool due = (r.expiration_days && day.after(version.modified_ns, *r.expiration_days) <= now_ns) ||
                       (r.expiration_date_ns && *r.expiration_date_ns <= now_ns);
      if (due) return LifecycleAction::kExpireCurrent;
      continue;
    }
    if (r.noncurrent_days && day.after(place.noncurrent_since_ns, *r.noncurrent_days) <= now_ns &&
        place.newer_noncurrent >= r.newer_noncurrent_versions.value_or(0)) {
      return LifecycleAction::kRemoveNoncurrent;
    }
  }
  return LifecycleAction::kNone;
}

std::string expiration_header(const LifecycleDue& due) {
  return "expiry-date=\"" + http_date(due.at_ns / kNsPerSecond) + "\", rule-id=\"" + due.rule_id + "\"";
}

}  // namespace keel::gateway
