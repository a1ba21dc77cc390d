#include <catch2/catch.hpp>

#include "engine/snapshot_tags.h"

using keel::engine::changed_tags;
using keel::engine::TagChange;
using Tags = std::vector<std::string>;

TEST_CASE("changed_tags sets, then adds, then removes, keeping order and each tag once", "[tag]") {
  CHECK(changed_tags({"a", "b"}, TagChange{.add = {"c", "a"}}) == Tags{"a", "b", "c"});
  CHECK(changed_tags({"a", "b"}, TagChange{.remove = {"a", "z"}}) == Tags{"b"});
  CHECK(changed_tags({"a", "b"}, TagChange{.set = Tags{"x", "x", "y"}}) == Tags{"x", "y"});
  CHECK(changed_tags({"a"}, TagChange{.set = Tags{"x"}, .add = {"y"}, .remove = {"x"}}) == Tags{"y"});
  // --set '' clears: empty tags are never kept.
  CHECK(changed_tags({"a", "b"}, TagChange{.set = Tags{""}}).empty());
  CHECK(changed_tags({"a"}, TagChange{}) == Tags{"a"});
}
