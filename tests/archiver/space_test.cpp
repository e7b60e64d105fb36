// Store::space on real archives: what the files take, what the versions use, and what the
// versions forget would remove alone hold (content a kept version names too is not freed),
// checked against the bytes the test wrote and against what a collection then gives back.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/format2/pack.hpp"
#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "archive_test_util.hpp"
#include "format1_writer.hpp"

namespace tw::archive {
namespace {

using test::TempDir;
using test::write_file;

constexpr std::int64_t kHour = 3600LL * 1'000'000'000;
constexpr std::int64_t kDay = 24 * kHour;
// Every content is one chunk that does not compress: it is stored as it is, so its stored
// bytes are its size.
constexpr std::uint64_t kSize = 100'000;

std::string noise(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(kSize, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

std::uint64_t file_bytes(const std::string& file) {
  std::error_code error;
  const auto size = std::filesystem::file_size(file, error);
  return error ? 0 : size;
}

std::uint64_t packs_bytes(const std::string& archive) {
  std::uint64_t total = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(archive + "/packs")) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

RetentionPolicy one_day() {
  RetentionPolicy policy;
  policy.keep_within_ns = 0;
  policy.keep_hourly = 0;
  policy.keep_daily = 1;
  policy.keep_weekly = 0;
  return policy;
}

// Whatever the time zone, the one midnight kept days after the writes sees each path's
// latest version only.
class SpaceTest : public ::testing::Test {
 protected:
  SpaceTest() { std::filesystem::create_directories(src_); }

  Store open() {
    StoreHooks hooks;
    hooks.now = [this] { return clock_; };
    auto store = Store::open(archive_, Store::Mode::ReadWrite, std::move(hooks));
    if (!store) throw std::runtime_error(store.error());
    return std::move(store.value());
  }

  void archive(Store& store, const std::string& path, const std::string* content) {
    clock_ += kHour;
    if (content != nullptr) {
      write_file(path, *content);
    } else {
      ASSERT_EQ(::unlink(path.c_str()), 0);
    }
    const auto result = store.update(path);
    ASSERT_EQ(result.outcome, Outcome::Complete) << result.message;
  }

  SpaceReport space(const Store& store, const std::vector<DroppedVersions>& left_out = {}) {
    auto report = store.space(left_out);
    EXPECT_TRUE(report) << report.error();
    return report ? *report : SpaceReport{};
  }

  TempDir dir_;
  std::string archive_ = dir_ / "archive";
  std::string src_ = dir_ / "src";
  std::int64_t clock_ = *parse_time_ns("2026-03-02T00:00:00Z");
};

TEST_F(SpaceTest, LiveAndFreedBytesFollowWhatWasWrittenAndWhatForgetRemoves) {
  const std::string a = src_ + "/a";
  const std::string b = src_ + "/b";
  const std::string c = src_ + "/c";
  const std::string one = noise(1);
  const std::string two = noise(2);
  const std::string three = noise(3);
  const std::string four = noise(4);
  {
    // The writer lets go of its pack when it closes (a collection leaves an open one alone).
    Store writer = open();
    archive(writer, a, &one);
    archive(writer, a, &two);
    archive(writer, a, &three);
    archive(writer, b, &one);  // the same content as a's first version: one blob for both
    archive(writer, c, &four);
    archive(writer, c, nullptr);  // c deleted: its history goes whole
  }
  Store store = open();
  const SpaceReport fresh = space(store);
  EXPECT_EQ(fresh.blobs, 4u);
  EXPECT_EQ(fresh.live_blobs, 4u);
  EXPECT_EQ(fresh.live_bytes, 4 * kSize);
  EXPECT_EQ(fresh.dead_bytes, 0u) << "nothing written is unused yet";
  ASSERT_TRUE(fresh.freed_bytes.has_value());
  EXPECT_EQ(*fresh.freed_bytes, 0u) << "nothing left out";
  EXPECT_GE(fresh.content_files, 1u);
  EXPECT_EQ(fresh.content_bytes, packs_bytes(archive_));
  EXPECT_EQ(fresh.catalog_bytes,
            file_bytes(archive_ + "/catalog.db") + file_bytes(archive_ + "/catalog.db-wal"));
  EXPECT_GT(fresh.catalog_bytes, 0u);
  EXPECT_EQ(fresh.total_bytes(), fresh.content_bytes + fresh.catalog_bytes);

  // Versions left out by hand: a's first version alone frees nothing (b still names its
  // content); with b's only version too, that content goes.
  const SpaceReport a1 = space(store, {{a, {1}, 0}});
  EXPECT_EQ(a1.freed_blobs, 0u);
  EXPECT_EQ(a1.freed_bytes, 0u);
  EXPECT_EQ(a1.live_bytes, 4 * kSize) << "what is left out is still there";
  const SpaceReport a1_b1 = space(store, {{a, {1}, 0}, {b, {1}, 0}});
  EXPECT_EQ(a1_b1.freed_blobs, 1u);
  EXPECT_EQ(a1_b1.freed_bytes, kSize);
  const SpaceReport a2_c = space(store, {{a, {2}, 0}, {c, {1, 2}, 0}});
  EXPECT_EQ(a2_c.freed_blobs, 2u);
  EXPECT_EQ(a2_c.freed_bytes, 2 * kSize);

  // Days later the policy keeps the latest of a and b only: a's versions 1 and 2 and the
  // whole of c go. Of those contents, a's first is b's too: only two and four are freed.
  clock_ += 5 * kDay;
  auto plan = store.plan_forget_space(one_day(), clock_, {});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->report.removed, 4u);
  EXPECT_EQ(plan->report.whole_paths, 1u);
  ASSERT_TRUE(plan->space.has_value()) << plan->unmeasured;
  EXPECT_EQ(plan->space->freed_blobs, 2u);
  EXPECT_EQ(plan->space->freed_bytes, 2 * kSize);
  EXPECT_EQ(plan->space->live_bytes, 4 * kSize);

  // Forget removes them: the blobs stay until a collection, named by no version.
  auto forgot = store.forget(one_day(), clock_, {});
  ASSERT_TRUE(forgot) << forgot.error();
  EXPECT_EQ(forgot->removed, 4u);
  const SpaceReport after = space(store);
  EXPECT_EQ(after.blobs, 4u);
  EXPECT_EQ(after.live_blobs, 2u);
  EXPECT_EQ(after.live_bytes, 2 * kSize);
  EXPECT_EQ(after.dead_bytes, 2 * (kSize + kBlobHeaderSize)) << "two records, headers and all";
  EXPECT_EQ(after.content_bytes, fresh.content_bytes);

  // The collection gives back what the plan said, and the dead bytes with it.
  auto collected = store.collect({});
  ASSERT_TRUE(collected) << collected.error();
  EXPECT_EQ(collected->bytes_swept, *plan->space->freed_bytes);
  const SpaceReport collected_space = space(store);
  EXPECT_EQ(collected_space.blobs, 2u);
  EXPECT_EQ(collected_space.live_bytes, 2 * kSize);
  EXPECT_EQ(collected_space.dead_bytes, 0u);
  EXPECT_EQ(collected_space.content_bytes, packs_bytes(archive_));
  EXPECT_LE(collected_space.content_bytes, fresh.content_bytes - 2 * (kSize + kBlobHeaderSize));
}

TEST_F(SpaceTest, ANewArchiveHoldsNothing) {
  Store store = open();
  const SpaceReport empty = space(store);
  EXPECT_EQ(empty.content_files, 0u);
  EXPECT_EQ(empty.content_bytes, 0u);
  EXPECT_EQ(empty.blobs, 0u);
  EXPECT_EQ(empty.live_bytes, 0u);
  EXPECT_EQ(empty.dead_bytes, 0u);
  EXPECT_GT(empty.catalog_bytes, 0u);
  // A path never archived has nothing to leave out.
  EXPECT_EQ(space(store, {{src_ + "/never", {1}, 0}}).freed_bytes, 0u);
}

// A catalog an earlier release wrote, read before a writer upgraded it, has no row ids for
// its blobs: space() says so, and a plan still says what forget would remove.
TEST_F(SpaceTest, ACatalogOfAnEarlierReleaseIsPlannedWithoutItsFigures) {
  const std::string unpack =
      "tar -xzf '" TW_TEST_DATA_DIR "/format2-catalog2-archive.tar.gz' -C '" + dir_.path() + "'";
  ASSERT_EQ(std::system(unpack.c_str()), 0) << unpack;
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  const auto figures = store->space();
  ASSERT_FALSE(figures);
  EXPECT_NE(figures.error().find("upgrades it"), std::string::npos) << figures.error();
  auto plan = store->plan_forget_space(RetentionPolicy{}, clock_, {});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_GT(plan->report.versions, 0u);
  EXPECT_FALSE(plan->space.has_value());
  EXPECT_EQ(plan->unmeasured, figures.error());
}

TEST_F(SpaceTest, AFormat1ArchiveCountsItsObjectsAsUsed) {
  test::Format1Writer writer(archive_);
  const std::string path = src_ + "/old";
  write_file(path, "first");
  writer.update(path);
  write_file(path, "second");
  writer.update(path);
  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  const SpaceReport report = space(*store);
  EXPECT_EQ(report.content_files, 2u);
  EXPECT_EQ(report.blobs, 2u);
  EXPECT_EQ(report.live_blobs, 2u);
  EXPECT_EQ(report.live_bytes, report.content_bytes);
  EXPECT_GT(report.content_bytes, 0u);
  EXPECT_GT(report.catalog_bytes, 0u) << "the nodes' files";
  EXPECT_EQ(report.dead_bytes, 0u);
  EXPECT_FALSE(report.freed_bytes.has_value()) << "format 1 cannot tell";
}

}  // namespace
}  // namespace tw::archive
