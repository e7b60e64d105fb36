// The retention policy: which instants it keeps (calendar boundaries in the local time
// zone, across summer-time changes) and which versions of a history those instants keep,
// with the property that makes `restore --at` exact: at every kept instant, every path's
// state is the version it was before anything was removed.
#include <cstdlib>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "archive/retention.hpp"
#include "archive/timefmt.hpp"

namespace tw::archive {
namespace {

constexpr std::int64_t kSec = 1'000'000'000;
constexpr std::int64_t kHour = 3600 * kSec;
constexpr std::int64_t kDay = 24 * kHour;

// Runs each test in a named time zone, and leaves the process's zone as it found it.
class RetentionTest : public ::testing::Test {
 protected:
  void zone(const char* name) {
    ::setenv("TZ", name, 1);
    ::tzset();
  }
  void TearDown() override {
    ::unsetenv("TZ");
    ::tzset();
  }
  static std::int64_t at(const char* text) {
    auto parsed = parse_time_ns(text);
    EXPECT_TRUE(parsed) << text;
    return parsed ? *parsed : 0;
  }
};

RetentionPolicy only(int hourly, int daily, int weekly, int monthly = 0, int yearly = 0) {
  RetentionPolicy policy;
  policy.keep_within_ns = 0;
  policy.keep_hourly = hourly;
  policy.keep_daily = daily;
  policy.keep_weekly = weekly;
  policy.keep_monthly = monthly;
  policy.keep_yearly = yearly;
  return policy;
}

Version version_at(std::uint64_t number, std::int64_t at_ns, Op op = Op::Update) {
  Version v;
  v.number = number;
  v.archived_at_ns = at_ns;
  v.op = op;
  v.mode = op == Op::Delete ? 0 : 0100644;
  return v;
}

// The version a restore --at finds: the latest archived at or before the instant.
const Version* state_at(const std::vector<Version>& history, std::int64_t at_ns) {
  const Version* found = nullptr;
  for (const auto& v : history) {
    if (v.archived_at_ns <= at_ns) found = &v;
  }
  return found;
}

TEST_F(RetentionTest, FullHoursAreThoseOfTheLocalClock) {
  zone("Asia/Kolkata");  // UTC+05:30: a local full hour is half past a UTC one
  const auto kept = kept_moments(only(3, 0, 0), at("2026-11-26T10:45:00+05:30"));
  const std::vector<std::int64_t> expected = {at("2026-11-26T08:00:00+05:30"),
                                              at("2026-11-26T09:00:00+05:30"),
                                              at("2026-11-26T10:00:00+05:30")};
  EXPECT_EQ(kept.instants, expected);
  ASSERT_TRUE(kept.from_ns);
  EXPECT_EQ(*kept.from_ns, at("2026-11-26T10:45:00+05:30"));  // keep_within 0: now only
}

TEST_F(RetentionTest, MidnightsFollowSummerTime) {
  zone("Europe/Berlin");  // summer time ends on 2026-10-25 at 03:00 CEST
  const auto kept = kept_moments(only(0, 3, 0), at("2026-10-26T12:00:00+01:00"));
  const std::vector<std::int64_t> expected = {at("2026-10-24T00:00:00+02:00"),
                                              at("2026-10-25T00:00:00+02:00"),
                                              at("2026-10-26T00:00:00+01:00")};
  EXPECT_EQ(kept.instants, expected);
  // The same moments in another zone are other instants.
  zone("UTC");
  EXPECT_NE(kept_moments(only(0, 3, 0), at("2026-10-26T12:00:00+01:00")).instants, expected);
}

TEST_F(RetentionTest, HoursAcrossTheHourThatRepeats) {
  zone("Europe/Berlin");  // 02:00-03:00 local happens twice on 2026-10-25
  const auto kept = kept_moments(only(4, 0, 0), at("2026-10-25T03:30:00+01:00"));
  // Every kept instant is a full hour of the local clock, and none is listed twice.
  ASSERT_GE(kept.instants.size(), 3U);
  for (std::size_t i = 1; i < kept.instants.size(); ++i) {
    EXPECT_LT(kept.instants[i - 1], kept.instants[i]);
    EXPECT_EQ((kept.instants[i] % kHour), 0) << "not a full hour in a whole-hour zone";
  }
  EXPECT_EQ(kept.instants.back(), at("2026-10-25T03:00:00+01:00"));
}

TEST_F(RetentionTest, WeeksStartOnMondayMonthsOnTheFirstYearsInJanuary) {
  zone("UTC");
  const auto now = at("2026-11-26T10:00:00Z");  // a Thursday
  EXPECT_EQ(kept_moments(only(0, 0, 2), now).instants,
            (std::vector<std::int64_t>{at("2026-11-16T00:00:00Z"), at("2026-11-23T00:00:00Z")}));
  EXPECT_EQ(kept_moments(only(0, 0, 0, 2), now).instants,
            (std::vector<std::int64_t>{at("2026-10-01T00:00:00Z"), at("2026-11-01T00:00:00Z")}));
  EXPECT_EQ(kept_moments(only(0, 0, 0, 0, 2), now).instants,
            (std::vector<std::int64_t>{at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z")}));
}

TEST_F(RetentionTest, TheWindowKeepsEveryRecentVersion) {
  zone("UTC");
  RetentionPolicy policy = only(0, 0, 0);
  policy.keep_within_ns = kHour;
  const auto now = at("2026-11-26T10:00:00Z");
  const auto kept = kept_moments(policy, now);
  std::vector<Version> history;
  for (int minute = 5; minute < 120; minute += 10) {  // 08:05, 08:15, ... 09:55
    history.push_back(version_at(history.size() + 1, now - 2 * kHour + minute * 60 * kSec));
  }
  const auto keep = kept_versions(history, kept);
  for (std::size_t i = 0; i < history.size(); ++i) {
    // The version in effect an hour ago (archived at 08:55) and everything after it.
    EXPECT_EQ(keep[i], history[i].archived_at_ns >= at("2026-11-26T08:55:00Z")) << i;
  }
}

TEST_F(RetentionTest, AVersionIsKeptWhenItWasTheStateAtAKeptInstant) {
  zone("UTC");
  const auto now = at("2026-11-26T10:30:00Z");
  const auto kept = kept_moments(only(3, 0, 0), now);  // 08:00, 09:00, 10:00 and now
  const std::vector<Version> history = {
      version_at(1, at("2026-11-26T07:10:00Z")),  // the state at 08:00
      version_at(2, at("2026-11-26T08:20:00Z")),  // replaced before 09:00
      version_at(3, at("2026-11-26T08:40:00Z")),  // the state at 09:00 and 10:00
      version_at(4, at("2026-11-26T10:10:00Z")),  // replaced before now
      version_at(5, at("2026-11-26T10:20:00Z")),  // the latest
  };
  EXPECT_EQ(kept_versions(history, kept), (std::vector<bool>{true, false, true, false, true}));
  // A pinned version stays whatever the policy says.
  EXPECT_EQ(kept_versions(history, kept, {2}), (std::vector<bool>{true, true, true, false, true}));
}

TEST_F(RetentionTest, ADeletedPathGoesOnceNoKeptInstantSeesIt) {
  zone("UTC");
  const auto now = at("2026-11-26T10:30:00Z");
  const auto kept = kept_moments(only(2, 0, 0), now);  // 09:00, 10:00 and now
  // Created and deleted between kept instants: nothing of it is kept.
  const std::vector<Version> gone = {version_at(1, at("2026-11-26T09:10:00Z")),
                                     version_at(2, at("2026-11-26T09:20:00Z"), Op::Delete)};
  EXPECT_EQ(kept_versions(gone, kept), (std::vector<bool>{false, false}));
  // Seen at 10:00, deleted after: the version and the tombstone that ends it.
  const std::vector<Version> seen = {version_at(1, at("2026-11-26T09:10:00Z")),
                                     version_at(2, at("2026-11-26T10:20:00Z"), Op::Delete)};
  EXPECT_EQ(kept_versions(seen, kept), (std::vector<bool>{true, true}));
  // Deleted and made again: the old life is gone, the tombstone with it, the new one kept.
  const std::vector<Version> again = {version_at(1, at("2026-11-26T08:10:00Z")),
                                      version_at(2, at("2026-11-26T08:20:00Z"), Op::Delete),
                                      version_at(3, at("2026-11-26T10:25:00Z"))};
  EXPECT_EQ(kept_versions(again, kept), (std::vector<bool>{false, false, true}));
  // Seen at 09:00, absent at 10:00, then made again and deleted again between kept
  // instants: the second life goes but its tombstone stays, the latest, so the history's
  // highest number is still its latest (else the next version would take a number used
  // before, and verify would find fewer gaps than versions removed).
  const std::vector<Version> twice = {version_at(1, at("2026-11-26T08:10:00Z")),
                                      version_at(2, at("2026-11-26T09:20:00Z"), Op::Delete),
                                      version_at(3, at("2026-11-26T10:10:00Z")),
                                      version_at(4, at("2026-11-26T10:15:00Z"), Op::Delete)};
  EXPECT_EQ(kept_versions(twice, kept), (std::vector<bool>{true, true, false, true}));
}

TEST_F(RetentionTest, AThinnedInstantNeverComesBack) {
  zone("UTC");
  const auto first = kept_moments(only(2, 0, 0), at("2026-11-26T10:30:00Z"));
  const auto later = kept_moments(only(2, 0, 0), at("2026-11-26T12:30:00Z"));
  const auto both = first.intersect(later);
  // The first run keeps 09:00, 10:00 and everything from 10:30; the later one 11:00, 12:00
  // and everything from 12:30: what stays kept is what both keep.
  EXPECT_FALSE(both.contains(at("2026-11-26T09:00:00Z")));
  EXPECT_FALSE(both.contains(at("2026-11-26T10:00:00Z")));
  EXPECT_FALSE(both.contains(at("2026-11-26T10:45:00Z")));
  EXPECT_TRUE(both.contains(at("2026-11-26T11:00:00Z")));
  EXPECT_FALSE(both.contains(at("2026-11-26T11:30:00Z")));
  EXPECT_TRUE(both.contains(at("2026-11-26T12:00:00Z")));
  EXPECT_TRUE(both.contains(at("2026-11-26T12:30:00Z")));
  EXPECT_EQ(both.kept_before(at("2026-11-26T10:45:00Z")), std::nullopt);
  EXPECT_EQ(both.kept_after(at("2026-11-26T10:45:00Z")), at("2026-11-26T11:00:00Z"));
  EXPECT_EQ(both.kept_before(at("2026-11-26T12:10:00Z")), at("2026-11-26T12:00:00Z"));
  EXPECT_EQ(both.kept_after(at("2026-11-26T12:10:00Z")), at("2026-11-26T12:30:00Z"));
  // A later run with a more generous policy does not bring 10:00 back: it is gone.
  const auto third = both.intersect(kept_moments(only(6, 0, 0), at("2026-11-26T13:30:00Z")));
  EXPECT_FALSE(third.contains(at("2026-11-26T10:00:00Z")));
  EXPECT_TRUE(third.contains(at("2026-11-26T12:00:00Z")));
  // A pinned moment is added to what a run keeps.
  EXPECT_TRUE(both.with({at("2026-11-26T10:00:00Z")}).contains(at("2026-11-26T10:00:00Z")));
}

// The property restore --at relies on, over random histories and runs of the policy at
// random times: at every instant the runs kept, every path's state after removing what
// they did not keep is the state before.
TEST_F(RetentionTest, EveryKeptInstantSeesTheSameStateAfterRemoval) {
  zone("Europe/Berlin");
  std::mt19937_64 random(20261127);
  const auto start = at("2026-10-01T00:00:00+02:00");
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Version> history;
    std::int64_t t = start;
    const int count = 1 + static_cast<int>(random() % 60);
    for (int i = 0; i < count; ++i) {
      t += static_cast<std::int64_t>(random() % (3 * kDay));
      const bool tombstone = !history.empty() && history.back().exists() && random() % 5 == 0;
      history.push_back(version_at(history.size() + 1, t, tombstone ? Op::Delete : Op::Update));
    }
    KeptMoments kept;  // two runs, the second later
    for (int run = 0; run < 2; ++run) {
      t += static_cast<std::int64_t>(random() % (5 * kDay));
      RetentionPolicy policy = only(24, 7, 4);
      policy.keep_within_ns = static_cast<std::int64_t>(random() % (2 * kDay));
      kept = kept.intersect(kept_moments(policy, t));
    }
    const auto keep = kept_versions(history, kept);
    std::vector<Version> left;
    for (std::size_t i = 0; i < history.size(); ++i) {
      if (keep[i]) left.push_back(history[i]);
    }
    ASSERT_TRUE(keep.back() || !history.back().exists()) << "the latest live version goes";
    std::vector<std::int64_t> probes = kept.instants;
    probes.push_back(*kept.from_ns);
    probes.push_back(t);
    for (const auto probe : probes) {
      const Version* before = state_at(history, probe);
      const Version* after = state_at(left, probe);
      const bool absent_before = before == nullptr || !before->exists();
      const bool absent_after = after == nullptr || !after->exists();
      ASSERT_EQ(absent_before, absent_after) << "trial " << trial << " at " << probe;
      if (!absent_before) {
        ASSERT_EQ(before->number, after->number) << "trial " << trial;
      }
    }
  }
}

// A folder's own policy takes the archive's values for the keys its entry leaves out, and
// the deepest folder holding a path gives that path's policy.
TEST_F(RetentionTest, AFoldersPolicyFillsInTheArchivesAndTheDeepestWins) {
  Config config;
  config.keep_daily = 9;
  config.retention_folder = {"/srv: keep_daily=2", "/srv/db: keep_within=1h keep_hourly=0"};
  auto policies = retention_policies(config);
  ASSERT_TRUE(policies) << policies.error();
  EXPECT_EQ(policies->of("/home/a").keep_daily, 9);
  EXPECT_EQ(policies->of("/srv").keep_daily, 2);
  EXPECT_EQ(policies->of("/srv/x").keep_daily, 2);
  EXPECT_EQ(policies->of("/srvx").keep_daily, 9) << "a folder holds its own components only";
  const RetentionPolicy& db = policies->of("/srv/db/table");
  EXPECT_EQ(db.keep_within_ns, kHour);
  EXPECT_EQ(db.keep_hourly, 0);
  EXPECT_EQ(db.keep_daily, 9) << "left out: the archive's value, not the parent folder's";
  config.retention_folder = {"/srv: keep_daily=2", "/srv/: keep_daily=3"};
  auto twice = retention_policies(config);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().find("retention_folder: /srv has two entries"), std::string::npos)
      << twice.error();
}

// Kept moments scope by scope: a folder recorded once stays a scope, and a scope that one
// side lacks takes that side's moments for the folder.
TEST_F(RetentionTest, ScopesKeepWhatBothSidesKeepForEachFolder) {
  zone("UTC");
  const std::int64_t now = at("2026-11-26T10:30:00Z");
  RetentionPolicies wide(only(0, 10, 0));
  RetentionPolicies narrow(only(0, 10, 0));
  narrow.folders.emplace_back("/srv/tmp", only(0, 2, 0));
  const KeptScopes first = kept_moments(narrow, now);
  EXPECT_EQ(first.scope_of("/srv/tmp/a"), "/srv/tmp");
  EXPECT_EQ(first.scope_of("/srv/tmpx"), "");
  EXPECT_EQ(first.folders_within("/srv"), std::vector<std::string_view>{"/srv/tmp"});
  EXPECT_TRUE(first.folders_within("/srv/tmp").empty());
  const std::int64_t five_days_ago = at("2026-11-21T00:00:00Z");
  EXPECT_TRUE(first.of("/srv/a").contains(five_days_ago));
  EXPECT_FALSE(first.of("/srv/tmp/a").contains(five_days_ago));
  // The folder's entry goes from the configuration: what its policy thinned stays thinned.
  const KeptScopes later = kept_moments(wide, now + kDay).intersect(first);
  ASSERT_TRUE(later.folders.contains("/srv/tmp"));
  EXPECT_FALSE(later.of("/srv/tmp/a").contains(five_days_ago));
  EXPECT_TRUE(later.of("/srv/a").contains(five_days_ago));
  // A folder that gets a policy of its own later starts from what the archive kept.
  RetentionPolicies long_folder(only(0, 2, 0));
  long_folder.folders.emplace_back("/srv/keep", only(0, 30, 0));
  const KeptScopes thinned = kept_moments(RetentionPolicies(only(0, 2, 0)), now);
  const KeptScopes again = kept_moments(long_folder, now).intersect(thinned);
  EXPECT_FALSE(again.of("/srv/keep/a").contains(five_days_ago));
  EXPECT_TRUE(again.of("/srv/keep/a").contains(at("2026-11-26T00:00:00Z")));
}

}  // namespace
}  // namespace tw::archive
