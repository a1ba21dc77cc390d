// Small ASCII text helpers for protocol parsing (HTTP, S3, SigV4).
#pragma once

#include <string>
#include <string_view>

namespace keel {

// A-Z become a-z; every other byte stays.
std::string ascii_lower(std::string_view text);
// Without leading and trailing spaces and tabs.
std::string_view trim_blanks(std::string_view text);
// Every byte but ASCII letters, digits and those in `keep` as %XX (upper-case hex).
std::string percent_encode(std::string_view text, std::string_view keep);
// Equal, in a time that depends on the lengths alone (signature checks).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace keel
