#include "gateway/post_policy.h"

#define BOOST_BIND_GLOBAL_PLACEHOLDERS  // json_parser includes the old boost/bind.hpp
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <algorithm>
#include <charconv>
#include <sstream>

#include "gateway/s3_error.h"
#include "util/bytes.h"
#include "util/error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

namespace pt = boost::property_tree;

[[noreturn]] void invalid(const std::string& why) { throw S3Error("InvalidPolicyDocument", "Invalid Policy: " + why); }

[[noreturn]] void refused(const std::string& why) {
  throw S3Error("AccessDenied", "Invalid according to Policy: " + why);
}

// "2026-11-27T18:00:00Z", with optional fractional seconds; -1 if malformed.
std::time_t parse_expiration(std::string_view text) {
  std::tm tm{};
  int consumed = 0;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &consumed) != 6 || consumed != 19) {
    return -1;
  }
  std::string_view rest = text.substr(19);
  if (rest.starts_with('.')) {
    rest.remove_prefix(1);
    const size_t digits = std::find_if_not(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) - rest.begin();
    if (digits == 0) return -1;
    rest.remove_prefix(digits);
  }
  if (rest != "Z" || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return timegm(&tm);
}

uint64_t parse_length(const std::string& text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    invalid("content-length-range takes two whole numbers of bytes, not '" + text + "'");
  }
  return value;
}

// A condition as the error message shows it.
std::string shown(const std::string& op, const std::string& field, const std::string& value) {
  return "[\"" + op + "\", \"$" + field + "\", \"" + value + "\"]";
}

bool exempt(std::string_view field) {
  return field.starts_with("x-ignore-") || field.starts_with("x-amz-checksum-") ||
         std::find(std::begin(kExemptFields), std::end(kExemptFields), field) != std::end(kExemptFields);
}

}  // namespace

PostPolicy PostPolicy::parse(std::string_view base64_policy) {
  std::string json;
  try {
    json = std::string(as_chars(from_base64(trim_blanks(base64_policy))));
  } catch (const Error&) {
    invalid("the policy field is not base64");
  }
  pt::ptree tree;
  std::istringstream in(json);
  try {
    pt::read_json(in, tree);
  } catch (const pt::json_parser_error& e) {
    invalid("the policy is not valid JSON: " + e.message());
  }
  PostPolicy policy;
  // The element names are case-sensitive (S3 refuses "EXPIRATION", "CONDITIONS").
  const auto expiration = tree.get_child_optional("expiration");
  if (!expiration || !expiration->empty()) invalid("Policy missing expiration.");
  policy.expiration_ = parse_expiration(expiration->data());
  if (policy.expiration_ < 0) invalid("Invalid 'expiration' value: '" + expiration->data() + "'");
  const auto conditions = tree.get_child_optional("conditions");
  if (!conditions || (conditions->empty() && !conditions->data().empty())) invalid("Policy missing conditions.");
  for (const auto& [unnamed, condition] : *conditions) {
    if (!unnamed.empty()) invalid("'conditions' must be a list");
    if (condition.empty()) invalid("Invalid Simple-Condition: Simple-Conditions must have exactly one property specified.");
    if (!condition.begin()->first.empty()) {  // {"field": "value"}
      if (condition.size() != 1) invalid("Invalid Simple-Condition: Simple-Conditions must have exactly one property specified.");
      const auto& [field, value] = *condition.begin();
      if (!value.empty()) invalid("the condition on '" + field + "' must have a string value");
      policy.conditions_.push_back({false, ascii_lower(field), value.data()});
      continue;
    }
    std::vector<std::string> items;
    for (const auto& [_, item] : condition) {
      if (!item.empty()) invalid("a condition list holds strings and numbers only");
      items.push_back(item.data());
    }
    const std::string op = items.empty() ? std::string() : ascii_lower(items[0]);
    if (op == "content-length-range") {
      if (items.size() != 3) invalid("content-length-range takes a minimum and a maximum");
      policy.min_size_ = parse_length(items[1]);
      policy.max_size_ = parse_length(items[2]);
      if (policy.min_size_ > policy.max_size_) invalid("content-length-range's minimum is above its maximum");
      continue;
    }
    if (op != "eq" && op != "starts-with") invalid("Invalid condition operator '" + (items.empty() ? "" : items[0]) + "'");
    if (items.size() != 3) invalid("Incorrect number of arguments in '" + items[0] + "'");
    if (!items[1].starts_with('$') || items[1].size() < 2) {
      invalid("'" + items[0] + "' names a field as \"$name\", not '" + items[1] + "'");
    }
    policy.conditions_.push_back({op == "starts-with", ascii_lower(items[1].substr(1)), items[2]});
  }
  return policy;
}

void PostPolicy::check(const NameValues& fields, std::time_t now) const {
  if (now > expiration_) refused("Policy expired.");
  for (const auto& c : conditions_) {
    const auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == c.field; });
    const std::string value = it == fields.end() ? std::string() : it->second;
    if (c.prefix ? !value.starts_with(c.value) : value != c.value) {
      refused("Policy Condition failed: " + shown(c.prefix ? "starts-with" : "eq", c.field, c.value));
    }
  }
  for (const auto& f : fields) {
    if (exempt(f.first)) continue;
    const bool named = std::any_of(conditions_.begin(), conditions_.end(), [&](const auto& c) { return c.field == f.first; });
    if (!named) refused("Extra input fields: " + f.first);
  }
}

void PostPolicy::check_size(uint64_t size) const {
  if (size > max_size_) throw S3Error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed size");
  if (size < min_size_) throw S3Error("EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size");
}

}  // namespace keel::gateway
