// Parsers for option values people write by hand: durations, fractions,
// sizes and counts. None can overflow: a value out of its range is an error
// naming the option, never a wrapped number.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace keel::cli {

// "90s", "30m", "1h30m", "2d12h": whole numbers, each with a unit (d, h, m,
// s), largest unit first, each unit at most once; "0" alone is zero; at most
// kLongestDuration, so it fits any clock. Throws Error(kUsage) naming
// `option` (e.g. "--rto") and what is wrong.
constexpr std::chrono::seconds kLongestDuration{100LL * 366 * 86400};
std::chrono::seconds parse_duration(std::string_view text, std::string_view option);

// "10%" or "0.1": a fraction in (0, 1], or [0, 1] with `allow_zero` (where
// 0 turns something off). Throws Error(kUsage) naming `option`.
double parse_fraction(std::string_view text, std::string_view option, bool allow_zero = false);

// "4096", "500M", "10GiB", "1T": a whole number of bytes, or of KiB, MiB,
// GiB or TiB (K, M, G, T, optionally followed by "iB" or "B"; all binary).
// Throws Error(kUsage) naming `option`.
uint64_t parse_size(std::string_view text, std::string_view option);

// A whole number from `min` to `max` ("-1", "1e3", "5x" or one out of range
// are refused); `unit` ("MiB") is named in the message. Throws Error(kUsage)
// naming `option`.
uint64_t parse_count(std::string_view text, std::string_view option, uint64_t min, uint64_t max,
                     std::string_view unit = "");

}  // namespace keel::cli
