// A source folder with a retention policy of its own (FORMAT.md, "Retention"): its paths
// keep its moments, the rest of the archive keeps the archive's, and `restore --at` stays
// exact wherever the moment is kept: a whole-tree restore at a moment the folder thinned
// gives back everything else and names the folder; the folder itself refuses it. The
// folder's kept moments are recorded in the catalog and outlive its entry in the
// configuration.
#include <sys/stat.h>

#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "archive_test_util.hpp"

namespace tw::archive {
namespace {

using test::read_file;
using test::TempDir;
using test::write_file;

constexpr std::int64_t kHour = 3600LL * 1'000'000'000;
constexpr std::int64_t kDay = 24 * kHour;

// The moments at the last `days` midnights, and nothing else.
RetentionPolicy daily(int days) {
  return {.keep_within_ns = 0, .keep_hourly = 0, .keep_daily = days, .keep_weekly = 0};
}

class FolderRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(src_ + "/keep");
    std::filesystem::create_directories(src_ + "/short");
    auto opened = Store::open(archive_, Store::Mode::ReadWrite, hooks());
    ASSERT_TRUE(opened) << opened.error();
    store_.emplace(std::move(*opened));
    // Both files change every day at noon for six days: the state at midnight d is the
    // content of day d - 1.
    for (int day = 0; day < 6; ++day) {
      clock_ = day0_ + day * kDay + 12 * kHour;
      for (const auto* name : {"keep/a", "short/b"}) {
        const std::string path = src_ + "/" + name;
        write_file(path, fmt::format("{} on day {}", name, day));
        const auto result = store_->update(path);
        ASSERT_EQ(result.outcome, Outcome::Complete) << result.message;
      }
    }
    clock_ = day0_ + 6 * kDay + kHour;
  }
  StoreHooks hooks() {
    StoreHooks hooks;
    hooks.now = [this] { return clock_; };
    return hooks;
  }

  // The archive keeps six midnights; src/short keeps two of its own.
  RetentionPolicies policies() const {
    RetentionPolicies p(daily(6));
    p.folders.emplace_back(src_ + "/short", daily(2));
    return p;
  }

  Expected<RestoreReport> restore_at(const std::string& path, std::int64_t at_ns) {
    RestoreOptions options;
    options.which.at_ns = at_ns;
    options.destination = dir_ / fmt::format("restored-{}", ++restores_);
    return store_->restore(path, options);
  }

  static std::string content(const char* name, int midnight) {
    return fmt::format("{} on day {}", name, midnight - 1);
  }

  test::ScopedTimeZone utc_{"UTC"};
  TempDir dir_;
  std::string archive_ = dir_ / "archive";
  std::string src_ = dir_ / "src";
  std::int64_t day0_ = *parse_time_ns("2026-03-02T00:00:00Z");
  std::int64_t clock_ = day0_;
  std::optional<Store> store_;
  int restores_ = 0;
};

TEST_F(FolderRetentionTest, AFolderKeepsItsOwnMomentsAndTheRestRestoresExactly) {
  auto report = store_->forget(policies(), clock_, {});
  ASSERT_TRUE(report) << report.error();
  // src/keep/a: midnights 1 to 6 and the latest; src/short/b: midnights 5 and 6.
  EXPECT_EQ(store_->versions(src_ + "/keep/a")->size(), 6u);
  EXPECT_EQ(store_->versions(src_ + "/short/b")->size(), 2u);
  ASSERT_TRUE(report->kept.folders.contains(src_ + "/short"));

  // The whole tree at midnight 3: src/keep exactly as it was, src/short left out and named.
  auto tree = restore_at(src_, day0_ + 3 * kDay);
  ASSERT_TRUE(tree) << tree.error();
  EXPECT_EQ(read_file(tree->destination + "/keep/a"), content("keep/a", 3));
  EXPECT_FALSE(std::filesystem::exists(tree->destination + "/short"));
  ASSERT_EQ(tree->problems.size(), 1u);
  EXPECT_NE(tree->problems[0].find(src_ + "/short not restored"), std::string::npos)
      << tree->problems[0];
  EXPECT_NE(tree->problems[0].find(format_time_ns(day0_ + 5 * kDay)), std::string::npos)
      << "names the nearest moment the folder kept: " << tree->problems[0];

  // The folder itself, or a path in it, at that moment: refused, naming its policy.
  auto inside = restore_at(src_ + "/short/b", day0_ + 3 * kDay);
  ASSERT_FALSE(inside);
  EXPECT_NE(inside.error().find("state of " + src_ + "/short at"), std::string::npos)
      << inside.error();
  EXPECT_NE(inside.error().find("retention policy thinned"), std::string::npos) << inside.error();
  // At a moment both keep, the whole tree is exact.
  auto both = restore_at(src_, day0_ + 5 * kDay);
  ASSERT_TRUE(both) << both.error();
  EXPECT_TRUE(both->problems.empty());
  EXPECT_EQ(read_file(both->destination + "/keep/a"), content("keep/a", 5));
  EXPECT_EQ(read_file(both->destination + "/short/b"), content("short/b", 5));
  EXPECT_TRUE(store_->verify().ok());
}

TEST_F(FolderRetentionTest, AFolderStaysThinnedAfterItsEntryGoesAndTheArchiveReopens) {
  ASSERT_TRUE(store_->forget(policies(), clock_, {}));
  // A later run without the folder's entry: the archive's policy would keep midnight 3,
  // but the folder's versions of it are gone; the restore must still say so.
  clock_ += kHour;
  auto later = store_->forget(RetentionPolicies(daily(6)), clock_, {});
  ASSERT_TRUE(later) << later.error();
  EXPECT_EQ(later->removed, 0u);
  store_.reset();
  auto reopened = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(reopened) << reopened.error();
  store_.emplace(std::move(*reopened));
  auto kept = store_->kept_moments();
  ASSERT_TRUE(kept) << kept.error();
  ASSERT_TRUE(kept->folders.contains(src_ + "/short"));
  EXPECT_FALSE(kept->of(src_ + "/short/b").contains(day0_ + 3 * kDay));
  EXPECT_TRUE(kept->of(src_ + "/keep/a").contains(day0_ + 3 * kDay));
  EXPECT_FALSE(restore_at(src_ + "/short/b", day0_ + 3 * kDay));
  auto kept_file = restore_at(src_ + "/keep/a", day0_ + 3 * kDay);
  ASSERT_TRUE(kept_file) << kept_file.error();
  EXPECT_EQ(read_file(kept_file->destination), content("keep/a", 3));
}

TEST_F(FolderRetentionTest, AFolderGivenALongerPolicyLaterBringsNothingBack) {
  // First the archive's policy thins everything to two midnights ...
  ASSERT_TRUE(store_->forget(RetentionPolicies(daily(2)), clock_, {}));
  // ... then src/short is given thirty: what was thinned stays thinned.
  RetentionPolicies longer(daily(2));
  longer.folders.emplace_back(src_ + "/short", daily(30));
  auto report = store_->forget(longer, clock_, {});
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->removed, 0u);
  EXPECT_FALSE(report->kept.of(src_ + "/short/b").contains(day0_ + 3 * kDay));
  EXPECT_FALSE(restore_at(src_ + "/short/b", day0_ + 3 * kDay));
  auto kept = restore_at(src_ + "/short/b", day0_ + 6 * kDay);
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_EQ(read_file(kept->destination), content("short/b", 6));
}

}  // namespace
}  // namespace tw::archive
