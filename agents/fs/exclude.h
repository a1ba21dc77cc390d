// Exclude patterns for the filesystem agent, matched like restic's --exclude
// against the absolute path of every entry found while walking.
//
//  - Paths and patterns are split at '/' into components.
//  - A pattern starting with '/' is anchored at the root: "/home/*/.cache"
//    matches /home/ann/.cache and nothing deeper or elsewhere.
//  - A pattern not starting with '/' matches at any depth, as if it began
//    with "**/": "*.tmp" and "node_modules" match entries of that name
//    anywhere; "build/*.o" matches /src/build/x.o and /build/y.o.
//  - Within a component '*', '?', "[...]" and '\' escapes work as in
//    fnmatch(3), and '*' matches a leading '.' too. A component that is
//    exactly "**" matches zero or more whole components.
//  - A pattern ending in '/' matches directories only ("cache/").
//  - The whole path must match. A directory that matches is left out with
//    everything under it.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace keel::agents::fs {

class ExcludeMatcher {
 public:
  // Throws Error(kUsage) for a pattern with no component ("", "/").
  explicit ExcludeMatcher(const std::vector<std::string>& patterns);

  bool empty() const { return patterns_.empty(); }

  // `components`: an absolute path split at '/', e.g. {"home", "ann", ".cache"}.
  bool excluded(std::span<const std::string> components, bool is_directory) const;

 private:
  struct Pattern {
    std::vector<std::string> components;
    // fixed_tail[i]: no "**" at or after component i, so the rest of the
    // pattern must match exactly the last (size - i) path components.
    std::vector<bool> fixed_tail;
    bool directories_only = false;
  };

  static bool matches(const Pattern& pattern, size_t pi, std::span<const std::string> path, size_t ci);

  std::vector<Pattern> patterns_;
};

}  // namespace keel::agents::fs
