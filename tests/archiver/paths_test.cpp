// Lexical path handling: the canonical form the archive keys histories by.
#include <gtest/gtest.h>

#include "archive/paths.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

TEST(Paths, NormalizeCollapsesSlashesAndDots) {
  EXPECT_EQ(*normalize_path("/a//b/./c/"), "/a/b/c");
  EXPECT_EQ(*normalize_path("/"), "/");
  EXPECT_EQ(*normalize_path("//"), "/");
  EXPECT_EQ(*normalize_path("/./"), "/");
  EXPECT_EQ(*normalize_path("/-rf/\n/%"), "/-rf/\n/%");
  EXPECT_EQ(*normalize_path("/a/...b/.."
                            "x"),
            "/a/...b/..x");
}

TEST(Paths, NormalizeRefusesWhatNeedsTheFilesystem) {
  EXPECT_FALSE(normalize_path(""));
  EXPECT_FALSE(normalize_path("relative"));
  EXPECT_FALSE(normalize_path("./x"));
  EXPECT_FALSE(normalize_path("/a/../b"));
  EXPECT_FALSE(normalize_path("/.."));
  EXPECT_FALSE(normalize_path(std::string("/a\0b", 4)));
  EXPECT_NE(normalize_path("rel").error().find("relative path"), std::string::npos);
}

TEST(Paths, ParentBaseAndWithin) {
  EXPECT_EQ(parent_path("/a/b"), "/a");
  EXPECT_EQ(parent_path("/a"), "/");
  EXPECT_EQ(parent_path("/"), "/");
  EXPECT_EQ(base_name("/a/b"), "b");
  EXPECT_EQ(base_name("/"), "");
  EXPECT_EQ(parent_path("a/b/c"), "a/b");
  EXPECT_EQ(parent_path("a"), ".");
  EXPECT_EQ(parent_path("/a/b/"), "/a/b");
  EXPECT_EQ(base_name("a"), "a");
  EXPECT_EQ(base_name("/a/"), "");
  EXPECT_TRUE(path_within("/a/b", "/a"));
  EXPECT_TRUE(path_within("/a", "/a"));
  EXPECT_FALSE(path_within("/ab", "/a"));
  EXPECT_TRUE(path_within("/x", "/"));
  EXPECT_EQ(components_below("/a/b/c", "/a"), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(components_below("/a/b", "/"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(components_below("/a", "/a").empty());
}

}  // namespace
}  // namespace tw::archive
