// The archive's tree at a moment through the facade (Store::version_at, list_at, tree_at):
// the same versions restore --at picks, tombstones (deleted, moved away) and paths archived
// later absent, a moment retention thinned refused as restore refuses it, and a listing of
// 10,000 entries read from one snapshot.
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "archive_test_util.hpp"

namespace tw::archive {
namespace {

using test::write_file;

// Archive times in the tests: whole hours and days of the injected clock.
constexpr std::int64_t kHour = 3600LL * 1'000'000'000;
constexpr std::int64_t kDay = 24 * kHour;

// The paths of `entries`, in their order.
std::vector<std::string> paths_of(const std::vector<Store::EntryAt>& entries) {
  std::vector<std::string> paths;
  for (const auto& entry : entries) paths.push_back(entry.path);
  return paths;
}

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::open(dir_ / "archive", Store::Mode::ReadWrite, hooks());
    ASSERT_TRUE(opened) << opened.error();
    store_.emplace(std::move(*opened));
  }
  StoreHooks hooks() {
    StoreHooks hooks;
    hooks.now = [this] { return clock_; };
    return hooks;
  }
  void archive(const std::string& path) {
    const auto result = store_->update(path);
    ASSERT_EQ(result.outcome, Outcome::Complete) << result.message;
  }
  std::string src(const std::string& name = "") const {
    return name.empty() ? src_ : src_ + "/" + name;
  }

  // src/a (changed later), src/d/x, src/gone (deleted later), src/moving (moved into src/d
  // later) at day0_; the changes at day0_ + 2h, and src/late archived then.
  void archive_two_moments() {
    write_file(src("a"), "a one");
    write_file(src("d/x"), "x");
    write_file(src("gone"), "gone");
    write_file(src("moving"), "moving");
    for (const char* name : {"", "a", "d", "d/x", "gone", "moving"}) archive(src(name));
    clock_ = day0_ + 2 * kHour;
    write_file(src("a"), "a two, longer");
    archive(src("a"));
    std::filesystem::remove(src("gone"));
    ASSERT_EQ(store_->remove(src("gone")).outcome, Outcome::Complete);
    std::filesystem::rename(src("moving"), src("d/moved"));
    ASSERT_EQ(store_->move(src("moving"), src("d/moved")).outcome, Outcome::Complete);
    write_file(src("late"), "late");
    archive(src("late"));
    clock_ = day0_ + 3 * kHour;
  }

  test::ScopedTimeZone utc_{"UTC"};
  test::TempDir dir_;
  std::string src_ = dir_ / "src";
  std::int64_t day0_ = *parse_time_ns("2026-03-02T00:00:00Z");
  std::int64_t clock_ = day0_;
  std::optional<Store> store_;
};

TEST_F(SnapshotTest, VersionAtPicksWhatRestorePicksAndNothingForATombstone) {
  archive_two_moments();
  const std::int64_t between = day0_ + kHour;
  auto now = store_->version_at(src("a"), std::nullopt);
  ASSERT_TRUE(now) << now.error();
  ASSERT_TRUE(now->has_value());
  EXPECT_EQ((*now)->number, 2u);
  EXPECT_EQ((*now)->size, std::string("a two, longer").size());
  auto earlier = store_->version_at(src("a"), between);
  ASSERT_TRUE(earlier) << earlier.error();
  ASSERT_TRUE(earlier->has_value());
  EXPECT_EQ((*earlier)->number, 1u);
  EXPECT_EQ((*earlier)->size, std::string("a one").size());

  // Deleted, moved away: there before, nothing now; the new name only after the move.
  for (const char* name : {"gone", "moving"}) {
    EXPECT_FALSE(store_->version_at(src(name), std::nullopt)->has_value()) << name;
    EXPECT_TRUE(store_->version_at(src(name), between)->has_value()) << name;
  }
  auto moved = store_->version_at(src("d/moved"), std::nullopt);
  ASSERT_TRUE(moved && moved->has_value());
  EXPECT_EQ((*moved)->moved_from, src("moving"));
  EXPECT_FALSE(store_->version_at(src("d/moved"), between)->has_value());
  // Archived after the moment, or never.
  EXPECT_FALSE(store_->version_at(src("late"), between)->has_value());
  EXPECT_TRUE(store_->version_at(src("late"), std::nullopt)->has_value());
  EXPECT_FALSE(store_->version_at(src("never"), std::nullopt)->has_value());
  EXPECT_FALSE(store_->version_at("relative/path", std::nullopt));
}

TEST_F(SnapshotTest, ListAtGivesTheEntriesThatExistedThenSortedByName) {
  archive_two_moments();
  const std::int64_t between = day0_ + kHour;
  auto now = store_->list_at(src(), std::nullopt);
  ASSERT_TRUE(now) << now.error();
  EXPECT_EQ(paths_of(*now), (std::vector<std::string>{src("a"), src("d"), src("late")}));
  EXPECT_EQ((*now)[0].version.number, 2u);
  auto earlier = store_->list_at(src(), between);
  ASSERT_TRUE(earlier) << earlier.error();
  EXPECT_EQ(paths_of(*earlier),
            (std::vector<std::string>{src("a"), src("d"), src("gone"), src("moving")}));
  EXPECT_EQ((*earlier)[0].version.number, 1u);
  EXPECT_EQ(paths_of(*store_->list_at(src("d"), std::nullopt)),
            (std::vector<std::string>{src("d/moved"), src("d/x")}));
  EXPECT_EQ(paths_of(*store_->list_at(src("d"), between)), (std::vector<std::string>{src("d/x")}));
  // Before anything was archived: nothing.
  auto before = store_->list_at(src(), day0_ - 1);
  ASSERT_TRUE(before) << before.error();
  EXPECT_TRUE(before->empty());
}

TEST_F(SnapshotTest, TreeAtGivesTheWholeTreeSortedByComponents) {
  archive_two_moments();
  const std::int64_t between = day0_ + kHour;
  auto now = store_->tree_at(src(), std::nullopt);
  ASSERT_TRUE(now) << now.error();
  EXPECT_TRUE(now->problems.empty());
  EXPECT_EQ(paths_of(now->entries),
            (std::vector<std::string>{src(), src("a"), src("d"), src("d/moved"), src("d/x"),
                                      src("late")}));
  auto earlier = store_->tree_at(src(), between);
  ASSERT_TRUE(earlier) << earlier.error();
  EXPECT_TRUE(earlier->problems.empty());
  EXPECT_EQ(paths_of(earlier->entries),
            (std::vector<std::string>{src(), src("a"), src("d"), src("d/x"), src("gone"),
                                      src("moving")}));
  EXPECT_EQ(earlier->entries[1].version.number, 1u);
  auto file = store_->tree_at(src("a"), std::nullopt);
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(paths_of(file->entries), (std::vector<std::string>{src("a")}));
}

// '-' and '.' sort before '/' as bytes, after it as components: a folder's entries come
// right after it, before its siblings whose names begin with its own.
TEST_F(SnapshotTest, TreeAtPutsAFoldersEntriesBeforeItsLongerNamedSiblings) {
  for (const char* name : {"d/x", "d/y/z", "d-x", "d.y", "d0"}) write_file(src(name), name);
  for (const char* name : {"", "d0", "d.y", "d-x", "d/y/z", "d/y", "d/x", "d"}) archive(src(name));
  auto tree = store_->tree_at(src(), std::nullopt);
  ASSERT_TRUE(tree) << tree.error();
  EXPECT_EQ(paths_of(tree->entries),
            (std::vector<std::string>{src(), src("d"), src("d/x"), src("d/y"), src("d/y/z"),
                                      src("d-x"), src("d.y"), src("d0")}));
}

// The archive keeps six midnights; src/short keeps two of its own (as in
// folder_retention_test.cpp). Both files change every day at noon for six days.
TEST_F(SnapshotTest, AThinnedMomentIsRefusedAndAThinnedFolderLeftOutAndNamed) {
  for (const char* name : {"keep/a", "short/b"}) write_file(src(name), "day 0");
  for (const char* name : {"", "keep", "short"}) archive(src(name));
  for (int day = 0; day < 6; ++day) {
    clock_ = day0_ + day * kDay + 12 * kHour;
    for (const char* name : {"keep/a", "short/b"}) {
      write_file(src(name), fmt::format("{} on day {}", name, day));
      archive(src(name));
    }
  }
  clock_ = day0_ + 6 * kDay + kHour;
  const RetentionPolicy daily6{
      .keep_within_ns = 0, .keep_hourly = 0, .keep_daily = 6, .keep_weekly = 0};
  RetentionPolicies policies(daily6);
  policies.folders.emplace_back(src("short"), RetentionPolicy{daily6.keep_within_ns, 0, 2, 0});
  ASSERT_TRUE(store_->forget(policies, clock_, {}));
  const std::int64_t midnight3 = day0_ + 3 * kDay;
  const std::string nearest_short = format_time_ns(day0_ + 5 * kDay);

  // Kept for src/keep: the version of day 2 (that of day 0 is number 1).
  auto kept = store_->version_at(src("keep/a"), midnight3);
  ASSERT_TRUE(kept && kept->has_value());
  EXPECT_EQ((*kept)->number, 3u);
  // Thinned for src/short: refused by each read, naming the nearest kept moment.
  auto inside = store_->version_at(src("short/b"), midnight3);
  ASSERT_FALSE(inside);
  EXPECT_NE(inside.error().find("retention policy thinned"), std::string::npos) << inside.error();
  EXPECT_NE(inside.error().find(nearest_short), std::string::npos) << inside.error();
  EXPECT_FALSE(store_->list_at(src("short"), midnight3));
  EXPECT_FALSE(store_->tree_at(src("short"), midnight3));
  // Thinned everywhere (no midnight): refused as restore --at refuses it.
  auto nowhere = store_->version_at(src("keep/a"), midnight3 + kHour);
  ASSERT_FALSE(nowhere);
  EXPECT_NE(nowhere.error().find("the archive no longer holds the state at"), std::string::npos)
      << nowhere.error();
  EXPECT_FALSE(store_->list_at(src(), midnight3 + kHour));
  EXPECT_FALSE(store_->tree_at(src(), midnight3 + kHour));

  // The listing and the tree above it leave src/short out; the tree names it.
  auto listed = store_->list_at(src(), midnight3);
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(paths_of(*listed), (std::vector<std::string>{src("keep")}));
  auto tree = store_->tree_at(src(), midnight3);
  ASSERT_TRUE(tree) << tree.error();
  EXPECT_EQ(paths_of(tree->entries), (std::vector<std::string>{src(), src("keep"), src("keep/a")}));
  ASSERT_EQ(tree->problems.size(), 1u);
  EXPECT_NE(tree->problems[0].find(src("short") + " left out"), std::string::npos)
      << tree->problems[0];
  EXPECT_NE(tree->problems[0].find(nearest_short), std::string::npos) << tree->problems[0];
  // At a moment both keep, everything.
  auto both = store_->tree_at(src(), day0_ + 5 * kDay);
  ASSERT_TRUE(both) << both.error();
  EXPECT_TRUE(both->problems.empty());
  EXPECT_EQ(both->entries.size(), 5u);
}

TEST_F(SnapshotTest, TenThousandEntriesAreListedWellUnderASecond) {
  constexpr int kEntries = 10'000;
  for (int i = 0; i < kEntries; ++i) write_file(src(fmt::format("many/{:05}", i)), "");
  // One group commit for them all: a commit each would take most of a minute.
  store_->begin_group();
  const auto scanned = store_->scan(src("many"));
  ASSERT_EQ(scanned.outcome, Outcome::Complete) << scanned.message;
  ASSERT_TRUE(store_->flush());
  std::filesystem::remove(src("many/00007"));
  ASSERT_EQ(store_->remove(src("many/00007")).outcome, Outcome::Complete);

  const auto start = std::chrono::steady_clock::now();
  auto listed = store_->list_at(src("many"), std::nullopt);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), static_cast<std::size_t>(kEntries - 1));
  EXPECT_EQ(listed->front().path, src("many/00000"));
  EXPECT_EQ((*listed)[7].path, src("many/00008"));
  EXPECT_LT(took, std::chrono::seconds(1))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

}  // namespace
}  // namespace tw::archive
