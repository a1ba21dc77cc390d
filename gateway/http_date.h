// HTTP dates as S3 clients send them (Date, If-Modified-Since, ...).
#pragma once

#include <ctime>
#include <string>

namespace keel::gateway {

// "Tue, 27 Mar 2007 19:36:42 GMT" (RFC 1123; "+0000", "UTC" or "Z" for the
// zone too, as SigV2 clients send) to seconds since the epoch; -1 if malformed.
std::time_t parse_http_date(const std::string& text);

}  // namespace keel::gateway
