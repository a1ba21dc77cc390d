// Parsers for option values people write by hand: durations and fractions.
#pragma once

#include <chrono>
#include <string_view>

namespace keel::cli {

// "90s", "30m", "1h30m", "2d12h": whole numbers, each with a unit (d, h, m,
// s), largest unit first, each unit at most once. Throws Error(kUsage)
// naming `option` (e.g. "--rto") and what is wrong.
std::chrono::seconds parse_duration(std::string_view text, std::string_view option);

// "10%" or "0.1": a fraction in (0, 1]. Throws Error(kUsage) naming `option`.
double parse_fraction(std::string_view text, std::string_view option);

}  // namespace keel::cli
