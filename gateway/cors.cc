#include "gateway/cors.h"

#include <algorithm>
#include <set>

#include "gateway/bucket_policy.h"
#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "gateway/xml_reader.h"
#include "util/text.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

constexpr size_t kMaxRules = 100;

std::vector<std::string> values(const boost::property_tree::ptree& rule, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& [child, tree] : rule) {
    if (child == name) out.push_back(xml_value(tree, ""));
  }
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

CorsConfiguration CorsConfiguration::parse(const std::string& xml) {
  const auto tree = read_xml_body(xml);
  const auto root = tree.get_child_optional("CORSConfiguration");
  if (!root) throw S3Error("MalformedXML", "the body is not a <CORSConfiguration> document");
  static const std::set<std::string> kMethods = {"GET", "PUT", "HEAD", "POST", "DELETE"};
  CorsConfiguration config;
  for (const auto& [name, rule] : *root) {
    if (name != "CORSRule") continue;
    CorsRule r;
    r.id = xml_value(rule, "ID");
    r.origins = values(rule, "AllowedOrigin");
    r.methods = values(rule, "AllowedMethod");
    r.allowed_headers = values(rule, "AllowedHeader");
    r.expose_headers = values(rule, "ExposeHeader");
    if (r.origins.empty() || r.methods.empty()) {
      throw S3Error("MalformedXML", "each CORSRule needs an AllowedOrigin and an AllowedMethod");
    }
    for (const auto& method : r.methods) {
      if (!kMethods.contains(method)) {
        throw S3Error("InvalidRequest", "Found unsupported HTTP method in CORS config. Unsupported method is " + method);
      }
    }
    for (const auto& origin : r.origins) {
      if (std::count(origin.begin(), origin.end(), '*') > 1) {
        throw S3Error("InvalidRequest", "AllowedOrigin \"" + origin + "\" can not have more than one wildcard.");
      }
    }
    for (const auto& header : r.allowed_headers) {
      if (std::count(header.begin(), header.end(), '*') > 1) {
        throw S3Error("InvalidRequest", "AllowedHeader \"" + header + "\" can not have more than one wildcard.");
      }
    }
    if (const std::string age = xml_value(rule, "MaxAgeSeconds"); !age.empty()) {
      if (age.find_first_not_of("0123456789") != std::string::npos || age.size() > 9) {
        throw S3Error("MalformedXML", "MaxAgeSeconds must be a number of seconds, not '" + age + "'");
      }
      r.max_age_seconds = std::stoull(age);
    }
    config.rules_.push_back(std::move(r));
  }
  if (config.rules_.empty()) throw S3Error("MalformedXML", "a CORSConfiguration needs at least one CORSRule");
  if (config.rules_.size() > kMaxRules) throw S3Error("MalformedXML", "a CORSConfiguration holds at most 100 rules");
  return config;
}

std::string CorsConfiguration::to_xml() const {
  XmlWriter xml;
  xml.open("CORSConfiguration", kS3Namespace);
  for (const auto& r : rules_) {
    xml.open("CORSRule");
    if (!r.id.empty()) xml.element("ID", r.id);
    for (const auto& h : r.allowed_headers) xml.element("AllowedHeader", h);
    for (const auto& m : r.methods) xml.element("AllowedMethod", m);
    for (const auto& o : r.origins) xml.element("AllowedOrigin", o);
    for (const auto& h : r.expose_headers) xml.element("ExposeHeader", h);
    if (r.max_age_seconds) xml.element("MaxAgeSeconds", *r.max_age_seconds);
    xml.close();
  }
  return xml.finish();
}

const CorsRule* CorsConfiguration::match(const std::string& origin, const std::string& method,
                                         const std::vector<std::string>& request_headers) const {
  for (const auto& rule : rules_) {
    const bool origin_ok = std::any_of(rule.origins.begin(), rule.origins.end(),
                                       [&](const std::string& o) { return wildcard_match(o, origin); });
    const bool method_ok = std::find(rule.methods.begin(), rule.methods.end(), method) != rule.methods.end();
    const bool headers_ok = std::all_of(request_headers.begin(), request_headers.end(), [&](const std::string& h) {
      return std::any_of(rule.allowed_headers.begin(), rule.allowed_headers.end(),
                         [&](const std::string& a) { return wildcard_match(ascii_lower(a), h); });
    });
    if (origin_ok && method_ok && headers_ok) return &rule;
  }
  return nullptr;
}

NameValues cors_headers(const CorsRule& rule, const std::string& origin, bool preflight,
                        const std::vector<std::string>& request_headers) {
  // A rule open to every origin answers "*" (no credentials), any other the origin itself.
  const bool any_origin = std::find(rule.origins.begin(), rule.origins.end(), "*") != rule.origins.end();
  NameValues headers;
  headers.emplace_back("access-control-allow-origin", any_origin ? "*" : origin);
  headers.emplace_back("access-control-allow-methods", joined(rule.methods));
  if (!any_origin) headers.emplace_back("access-control-allow-credentials", "true");
  if (!rule.expose_headers.empty()) headers.emplace_back("access-control-expose-headers", joined(rule.expose_headers));
  if (preflight) {
    if (!request_headers.empty()) headers.emplace_back("access-control-allow-headers", joined(request_headers));
    if (rule.max_age_seconds) headers.emplace_back("access-control-max-age", std::to_string(*rule.max_age_seconds));
  }
  headers.emplace_back("vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method");
  return headers;
}

std::vector<std::string> requested_headers(const std::string& header) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= header.size()) {
    const size_t comma = std::min(header.find(',', start), header.size());
    std::string item = header.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(ascii_lower(item));
    start = comma + 1;
  }
  return out;
}

}  // namespace keel::gateway
