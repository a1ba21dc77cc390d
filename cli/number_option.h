// Whole-number command-line options that cannot wrap: program_options reads
// "-1" into an unsigned as its maximum and a too-large value modulo 2^n, so
// these options take the text and parse_count checks it against the range
// the command can use.
#pragma once

#include <cstdint>
#include <string>

#include <boost/program_options.hpp>

#include "cli/parse.h"

namespace keel::cli {

// The ranges the commands accept, in the options' own units.
constexpr uint64_t kMaxMemoryMib = 1 << 20;  // --memory: 1 TiB of data in flight
constexpr uint64_t kMaxKeepCount = 1000000;  // --keep-*, --runs
constexpr uint64_t kMaxReaders = 1024;       // --readers, --max-concurrent
constexpr uint64_t kMaxChunkKib = 64 * 1024;  // --chunk-*: a chunk is held in memory whole
constexpr uint64_t kMaxPackMib = 4096;       // --pack-size: each pack is one object on the target

// For opts.add_options()("keep-last", count_option(&policy.last, "--keep-last", 1, 1000000), "...").
// `target` keeps its value unless the option is given; the help shows it as the default.
template <typename T>
boost::program_options::typed_value<std::string>* count_option(T* target, std::string option, uint64_t min,
                                                               uint64_t max, std::string unit = "") {
  auto* value = boost::program_options::value<std::string>();
  value->value_name(unit.empty() ? "N" : unit);
  value->notifier([=](const std::string& text) { *target = static_cast<T>(parse_count(text, option, min, max, unit)); });
  return value;
}

}  // namespace keel::cli
