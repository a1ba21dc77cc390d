// A fresh directory under the system temp dir for a test, removed with
// everything in it.
#pragma once

#include <filesystem>
#include <string>

#include "util/id.h"

namespace keel::test {

struct TempDir {
  explicit TempDir(const std::string& prefix = "keel-test")
      : path(std::filesystem::temp_directory_path() / (prefix + "-" + Id::random().short_hex())) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }

  std::filesystem::path path;
};

}  // namespace keel::test
