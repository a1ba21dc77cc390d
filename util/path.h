// Slash-separated paths as keel handles them: on disk, in snapshots, and
// as the user gave them. Pure string work; nothing here touches the disk.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace keel {

// `dir` and `name` with one '/' between them: ("/", "a") -> "/a",
// ("/d", "a") -> "/d/a", ("out/", "a") -> "out/a".
std::string join_path(const std::string& dir, const std::string& name);

// The components of `path`, without empty and "." ones ("/a//./b" -> a, b).
// ".." is kept: what it means depends on symlinks.
std::vector<std::string> split_path(const std::string& path);

// The absolute path of `components` ("/" for none).
std::string join_components(std::span<const std::string> components);

// True if `path` is `dir` or lies below it ("/a/b" is within "/a" and "/",
// "/ab" is not within "/a").
bool path_within(const std::string& path, const std::string& dir);

}  // namespace keel
