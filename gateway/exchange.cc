#include "gateway/exchange.h"

#include <ctime>

namespace keel::gateway {

Response error_response(const S3Error& error, std::string_view resource, std::string_view request_id) {
  Response r;
  r.status = error.http_status();
  r.headers = {{"content-type", "application/xml"}, {"x-amz-request-id", std::string(request_id)}};
  r.headers.insert(r.headers.end(), error.headers.begin(), error.headers.end());
  r.body = error_document(error, resource, request_id);
  return r;
}

std::string http_date(int64_t seconds) {
  const std::time_t t = seconds;
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return text;
}

std::string iso8601(int64_t nanoseconds) {
  const std::time_t t = nanoseconds / 1'000'000'000;
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  char millis[8];
  std::snprintf(millis, sizeof millis, ".%03dZ", static_cast<int>(nanoseconds / 1'000'000 % 1000));
  return std::string(text) + millis;
}

}  // namespace keel::gateway
