#include <catch2/catch.hpp>

#include "util/path.h"

using namespace keel;
using Parts = std::vector<std::string>;

TEST_CASE("join_path puts one slash between directory and name", "[path]") {
  CHECK(join_path("/", "a") == "/a");
  CHECK(join_path("/d", "a") == "/d/a");
  CHECK(join_path("out/", "a") == "out/a");
  CHECK(join_path("", "a") == "a");
}

TEST_CASE("split_path drops empty and '.' components and keeps '..'", "[path]") {
  CHECK(split_path("/a//./b/") == Parts{"a", "b"});
  CHECK(split_path("a/../b") == Parts{"a", "..", "b"});
  CHECK(split_path("/").empty());
  CHECK(split_path("").empty());
  CHECK(join_components(split_path("/x/y")) == "/x/y");
  CHECK(join_components(Parts{}) == "/");
}

TEST_CASE("path_within is true for the directory itself and what lies below it", "[path]") {
  CHECK(path_within("/a", "/a"));
  CHECK(path_within("/a/b", "/a"));
  CHECK(path_within("/a/b", "/"));
  CHECK(path_within("/", "/"));
  CHECK_FALSE(path_within("/ab", "/a"));
  CHECK_FALSE(path_within("/a", "/a/b"));
}
