#include "agents/fs/exclude.h"

#include <fnmatch.h>

#include "util/error.h"

namespace keel::agents::fs {
namespace {

constexpr const char* kGlobstar = "**";

}  // namespace

ExcludeMatcher::ExcludeMatcher(const std::vector<std::string>& patterns) {
  for (const std::string& text : patterns) {
    if (text.find_first_not_of('/') == std::string::npos) {
      throw Error(ErrorKind::kUsage, "exclude pattern '" + text + "' names no path");
    }
    Pattern pattern;
    if (text.front() != '/') pattern.components.push_back(kGlobstar);
    size_t start = 0;
    while (start <= text.size()) {
      size_t slash = text.find('/', start);
      if (slash == std::string::npos) slash = text.size();
      if (slash > start) pattern.components.push_back(text.substr(start, slash - start));
      start = slash + 1;
    }
    pattern.directories_only = text.back() == '/';
    pattern.fixed_tail.resize(pattern.components.size());
    bool fixed = true;
    for (size_t i = pattern.components.size(); i-- > 0;) {
      if (pattern.components[i] == kGlobstar) fixed = false;
      pattern.fixed_tail[i] = fixed;
    }
    patterns_.push_back(std::move(pattern));
  }
}

bool ExcludeMatcher::excluded(std::span<const std::string> components, bool is_directory) const {
  for (const Pattern& pattern : patterns_) {
    if (pattern.directories_only && !is_directory) continue;
    if (matches(pattern, 0, components, 0)) return true;
  }
  return false;
}

bool ExcludeMatcher::matches(const Pattern& pattern, size_t pi, std::span<const std::string> path, size_t ci) {
  const std::vector<std::string>& pat = pattern.components;
  while (pi < pat.size()) {
    if (pat[pi] == kGlobstar) {
      while (pi < pat.size() && pat[pi] == kGlobstar) ++pi;
      if (pi == pat.size()) return true;
      if (pattern.fixed_tail[pi]) {
        // Only one place for the rest: the last components of the path.
        size_t needed = pat.size() - pi;
        if (path.size() - ci < needed) return false;
        ci = path.size() - needed;
        continue;
      }
      for (size_t start = ci; start < path.size(); ++start) {
        if (matches(pattern, pi, path, start)) return true;
      }
      return false;
    }
    if (ci == path.size() || ::fnmatch(pat[pi].c_str(), path[ci].c_str(), 0) != 0) return false;
    ++pi;
    ++ci;
  }
  return ci == path.size();
}

}  // namespace keel::agents::fs
