// A bucket's CORS configuration (Put/Get/DeleteBucketCors) and how it answers
// browsers: a preflight (OPTIONS with Origin and Access-Control-Request-Method)
// and the Access-Control-* headers of an actual request that carries Origin.
// A rule applies when one of its AllowedOrigins matches the origin (each may
// hold one '*' standing for any run of characters; '?' matches one, as in
// bucket policies), one of its AllowedMethods
// is the method, and, for a preflight, every requested header matches one of
// its AllowedHeaders; the first such rule answers, as S3 does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gateway/request.h"

namespace keel::gateway {

struct CorsRule {
  std::string id;
  std::vector<std::string> origins, methods, allowed_headers, expose_headers;
  std::optional<uint64_t> max_age_seconds;
};

class CorsConfiguration {
 public:
  // Reads a <CORSConfiguration> body; throws S3Error MalformedXML or
  // InvalidRequest (an unknown method, an origin with two '*') as S3 does.
  static CorsConfiguration parse(const std::string& xml);
  std::string to_xml() const;

  // The first rule that lets `origin` use `method` sending `request_headers`
  // (lower case), or nullptr.
  const CorsRule* match(const std::string& origin, const std::string& method,
                        const std::vector<std::string>& request_headers = {}) const;

  const std::vector<CorsRule>& rules() const { return rules_; }

 private:
  std::vector<CorsRule> rules_;
};

// The Access-Control-* headers `rule` sends for a request from `origin`;
// `preflight` adds the allowed headers (as requested) and Max-Age.
NameValues cors_headers(const CorsRule& rule, const std::string& origin, bool preflight,
                        const std::vector<std::string>& request_headers = {});

// Access-Control-Request-Headers split at commas, trimmed and lower-cased.
std::vector<std::string> requested_headers(const std::string& header);

}  // namespace keel::gateway
