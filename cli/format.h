// Human-readable sizes, rates, durations and times for CLI output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace keel::cli {

std::string human_bytes(uint64_t bytes);           // "1.5 GiB"
std::string human_rate(double bytes_per_second);   // "312.4 MB/s" (decimal, as disks and links)
std::string human_duration(double seconds);        // "1m23s", "0.41s"
std::string local_time(int64_t unix_ns);           // "2026-11-23 14:05:09"
std::string iso_time(int64_t unix_ns);             // "2026-11-23T13:05:09.123Z"
std::string comma_joined(const std::vector<std::string>& items);  // "a,b,c"

}  // namespace keel::cli
