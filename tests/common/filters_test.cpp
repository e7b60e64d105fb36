#include "common/filters.hpp"

#include <gtest/gtest.h>

namespace tw {
namespace {

TEST(GlobMatch, StarStaysWithinAComponentDoubleStarCrossesThem) {
  EXPECT_TRUE(glob_match("*.tmp", "a.tmp"));
  EXPECT_TRUE(glob_match("*.tmp", ".tmp"));
  EXPECT_FALSE(glob_match("*.tmp", "a.tmp.x"));
  EXPECT_FALSE(glob_match("*.o", "dir/a.o"));
  EXPECT_TRUE(glob_match("**.o", "dir/a.o"));
  EXPECT_TRUE(glob_match("build/**", "build/x/y/z"));
  EXPECT_TRUE(glob_match("a/**/b", "a/x/y/b"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "a/c"));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "x"));
  EXPECT_TRUE(glob_match("*", ""));
}

TEST(GlobMatch, ClassesAndQuoting) {
  EXPECT_TRUE(glob_match("[abc]x", "bx"));
  EXPECT_FALSE(glob_match("[abc]x", "dx"));
  EXPECT_TRUE(glob_match("[a-c]", "b"));
  EXPECT_TRUE(glob_match("[!a-c]", "d"));
  EXPECT_TRUE(glob_match("[^a-c]", "d"));
  EXPECT_FALSE(glob_match("[!a-c]", "a"));
  EXPECT_TRUE(glob_match("[]]", "]"));
  EXPECT_TRUE(glob_match("\\*", "*"));
  EXPECT_FALSE(glob_match("\\*", "a"));
  EXPECT_TRUE(glob_match("[", "["));  // an unclosed class is a literal '['
}

TEST(GlobMatch, BytesThatAreNotUtf8AndControlCharacters) {
  EXPECT_TRUE(glob_match("*.bin", std::string("\xff\xfe\n\t%.bin")));
  EXPECT_TRUE(glob_match(std::string("a\nb"), std::string("a\nb")));
}

TEST(GlobMatch, ManyStarsStayFast) {
  const std::string text(4000, 'a');
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*a*a*b", text));
}

TEST(Filter, ExcludeByNameAtAnyDepthAndEverythingBeneath) {
  const Filter f({"/src"}, {"*.tmp", ".git"}, {}, 0);
  EXPECT_FALSE(f.excluded("/src"));
  EXPECT_FALSE(f.excluded("/src/a.txt"));
  EXPECT_TRUE(f.excluded("/src/a.tmp"));
  EXPECT_TRUE(f.excluded("/src/d/e/a.tmp"));
  EXPECT_TRUE(f.excluded("/src/.git"));
  EXPECT_TRUE(f.excluded("/src/.git/objects/x"));
  EXPECT_TRUE(f.excluded("/src/sub/.git/HEAD"));
  EXPECT_FALSE(f.excluded("/src/.gitignore"));
}

TEST(Filter, RelativeAndAbsolutePatterns) {
  const Filter f({"/src", "/other"}, {"build/*.o", "/other/cache"}, {}, 0);
  EXPECT_TRUE(f.excluded("/src/build/a.o"));
  EXPECT_FALSE(f.excluded("/src/x/build/a.o"));  // relative to the root
  EXPECT_TRUE(f.excluded("/other/cache/x"));
  EXPECT_FALSE(f.excluded("/src/cache/x"));
}

TEST(Filter, IncludeWinsOverExcludeForThePathItMatches) {
  const Filter f({"/src"}, {"*.log", "cache"}, {"keep.log", "cache"}, 0);
  EXPECT_TRUE(f.excluded("/src/a.log"));
  EXPECT_FALSE(f.excluded("/src/keep.log"));
  EXPECT_FALSE(f.excluded("/src/cache/x"));
  const Filter g({"/src"}, {"cache"}, {"cache/important"}, 0);
  EXPECT_TRUE(g.excluded("/src/cache/important"));  // its directory is excluded
  const Filter h({"/src"}, {"cache/*"}, {"cache/important"}, 0);
  EXPECT_FALSE(h.excluded("/src/cache/important"));
  EXPECT_TRUE(h.excluded("/src/cache/other"));
}

TEST(Filter, PathsOutsideEveryRootAreExcluded) {
  const Filter f({"/src"}, {}, {}, 0);
  EXPECT_TRUE(f.excluded("/elsewhere/a"));
  EXPECT_TRUE(f.excluded("/srcx/a"));
  EXPECT_EQ(f.root_of("/src/a/b"), "/src");
  EXPECT_EQ(f.root_of("/srcx"), "");
}

TEST(Filter, NestedRootsBelongToTheLongest) {
  const Filter f({"/src", "/src/inner"}, {}, {}, 0);
  EXPECT_EQ(f.root_of("/src/inner/x"), "/src/inner");
  EXPECT_EQ(f.root_of("/src/x"), "/src");
}

TEST(Filter, ABackupRootInsideASourceIsNeverWatched) {
  const Filter f({"/src"}, {}, {}, 0, "/src/archive");
  EXPECT_TRUE(f.excluded("/src/archive"));
  EXPECT_TRUE(f.excluded("/src/archive/objects/ab"));
  EXPECT_FALSE(f.excluded("/src/archive2"));
  Config config;
  config.source_dirs = {"/backup/inside"};
  config.backup_root = "/backup";
  EXPECT_THROW(Filter::from_config(config), std::runtime_error);
}

TEST(Filter, MaximumFileSizeAppliesToRegularFilesOnly) {
  const Filter f({"/src"}, {}, {}, 100);
  struct stat st {};
  st.st_mode = S_IFREG | 0644;
  st.st_size = 100;
  EXPECT_FALSE(f.too_big(st));
  st.st_size = 101;
  EXPECT_TRUE(f.too_big(st));
  st.st_mode = S_IFLNK | 0777;
  EXPECT_FALSE(f.too_big(st));
  st.st_mode = S_IFREG | 0644;
  st.st_size = std::int64_t{1} << 40;
  EXPECT_FALSE(Filter({"/src"}, {}, {}, 0).too_big(st));
}

}  // namespace
}  // namespace tw
