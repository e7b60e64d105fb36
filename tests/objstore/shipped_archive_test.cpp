// An archive read from its pack store alone (Store::open_shipped; FORMAT.md, "Shipping"):
// with the local folder deleted, every source restores from the bucket byte for byte and in
// metadata, at the latest moment and at an earlier one, verify finds nothing wrong, the
// packs read stay within the cache's budget, and after a purge and a collection the store
// keeps one catalog, whose packs are all there.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/pack_cache.hpp"
#include "archive/store.hpp"
#include "common/time.hpp"
#include "objstore/gateway.hpp"
#include "objstore/pack_store.hpp"
#include "support/test_support.hpp"
#include "support/tree_snapshot.hpp"

namespace tw::objstore {
namespace {

namespace fs = std::filesystem;
using archive::Store;
using test::noise;
using test::TempDir;
using test::write_file;

constexpr std::string_view kPrefix = "host-b";
constexpr std::uint64_t kBudget = 8 << 20;

class ShippedArchive : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_REQUIRE_STORE();
    fs::create_directories(src_);
    bucket_name_ = fresh_bucket().config().bucket;
  }

  std::unique_ptr<BucketPackStore> packs() {
    auto bucket = Bucket::open(gateway(bucket_name_));
    EXPECT_TRUE(bucket) << (bucket ? "" : bucket.error());
    return std::make_unique<BucketPackStore>(std::move(bucket.value()), std::string(kPrefix));
  }

  // Archives the whole source tree (a SCAN of each folder) and ships it.
  void archive_and_ship() {
    auto store = Store::open(root_, Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    std::vector<std::string> dirs{src_};
    for (const auto& entry : fs::recursive_directory_iterator(src_)) {
      if (entry.is_directory() && !entry.is_symlink()) dirs.push_back(entry.path().string());
    }
    for (const std::string& dir : dirs) {
      const auto result = store->scan(dir);
      ASSERT_EQ(result.outcome, tw::Outcome::Complete) << result.message;
    }
    auto to = packs();
    archive::ShipReport report;
    ASSERT_TRUE(store->ship(*to, report)) << "shipping";
    EXPECT_FALSE(report.catalog.empty());
  }

  Store open_shipped() {
    auto store = Store::open_shipped(packs(), cache_, kBudget);
    EXPECT_TRUE(store) << (store ? "" : store.error());
    return std::move(store.value());
  }

  // `store`'s restore of the sources at `at_ns` (latest when unset), as a tree.
  test::TreeSnapshot restored(const Store& store, std::optional<std::int64_t> at_ns,
                              const std::string& name) {
    archive::RestoreOptions options;
    options.which.at_ns = at_ns;
    options.destination = (dir_ / name).string();
    auto report = store.restore(src_, options);
    EXPECT_TRUE(report) << (report ? "" : report.error());
    if (report) {
      EXPECT_TRUE(report->problems.empty()) << report->problems.front();
    }
    return test::snapshot_tree(options.destination);
  }

  // Bytes the cache's pack files take on disk now.
  std::uint64_t cache_held() const {
    std::uint64_t out = 0;
    for (const auto& entry : fs::recursive_directory_iterator(cache_)) {
      struct stat st {};
      if (entry.path().string().find("/packs/") != std::string::npos &&
          ::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        out += static_cast<std::uint64_t>(st.st_blocks) * 512;
      }
    }
    return out;
  }

  TempDir dir_;
  std::string src_ = (dir_ / "src").string();
  std::string root_ = (dir_ / "archive").string();
  std::string cache_ = (dir_ / "cache").string();
  std::string bucket_name_;
};

TEST_F(ShippedArchive, EverySourceRestoresFromTheBucketAloneAtTheLatestAndAnEarlierMoment) {
  fs::create_directories(src_ + "/a/b");
  for (int i = 0; i < 12; ++i) write_file(fmt::format("{}/a/f{}", src_, i), noise(700'000, i));
  write_file(src_ + "/a/b/large", noise(9'000'000, 99));
  write_file(src_ + "/empty", "");
  write_file(src_ + "/odd \x01\xff\nname", "bytes of an odd name");
  ASSERT_EQ(::symlink("a/b/large", (src_ + "/link").c_str()), 0);
  ASSERT_EQ(::chmod((src_ + "/a/f3").c_str(), 0640), 0);
  archive_and_ship();
  const test::TreeSnapshot before = test::snapshot_tree(src_);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::int64_t earlier = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));

  write_file(src_ + "/a/f1", noise(300'000, 1001));
  fs::remove(src_ + "/a/f2");
  fs::rename(src_ + "/a/f4", src_ + "/a/b/f4-moved");
  write_file(src_ + "/a/b/new", noise(2'000'000, 1002));
  archive_and_ship();
  const test::TreeSnapshot after = test::snapshot_tree(src_);

  fs::remove_all(root_);  // the host's disk is lost: the bucket alone is left
  {
    const Store store = open_shipped();
    EXPECT_EQ(test::diff_trees(after, restored(store, std::nullopt, "latest")), "");
    EXPECT_EQ(test::diff_trees(before, restored(store, earlier, "earlier")), "");
    // 28 MB of incompressible files were read through an 8 MiB cache: beyond the budget,
    // at most the blocks of the one fetch being made.
    EXPECT_LE(cache_held(), kBudget + 3 * archive::PackCache::kBlock);
    const auto report = store.verify();
    EXPECT_TRUE(report.ok()) << (report.problems.empty() ? "" : report.problems.front());
    EXPECT_GT(report.objects, 0u);
  }
  // The reader's own folder goes with it; the catalog fetched stays for the next one.
  for (const auto& entry : fs::directory_iterator(cache_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("run-")) << entry.path();
  }
}

TEST_F(ShippedArchive, AfterAPurgeTheStoreKeepsOneCatalogWhosePacksAreAllThere) {
  write_file(src_ + "/secret", noise(400'000, 7));
  write_file(src_ + "/kept", noise(400'000, 8));
  archive_and_ship();
  {
    auto store = Store::open(root_, Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    ASSERT_TRUE(store->purge(src_ + "/secret", false));
    auto collected = store->collect({});
    ASSERT_TRUE(collected) << collected.error();
  }
  fs::remove(src_ + "/secret");
  archive_and_ship();
  auto listed = packs()->list_files("catalog");
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(listed->size(), 1u);

  fs::remove_all(root_);
  const Store store = open_shipped();
  const auto report = store.verify();
  EXPECT_TRUE(report.ok()) << (report.problems.empty() ? "" : report.problems.front());
  EXPECT_EQ(test::diff_trees(test::snapshot_tree(src_), restored(store, std::nullopt, "out")), "");
}

TEST_F(ShippedArchive, ABucketWithoutACatalogIsNamedAndNothingIsMade) {
  auto store = Store::open_shipped(packs(), cache_, kBudget);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().find("holds no catalog"), std::string::npos) << store.error();
  EXPECT_NE(store.error().find(std::string(kPrefix)), std::string::npos) << store.error();
}

TEST_F(ShippedArchive, ADamagedCatalogIsNamedAndLeavesNothingInTheCache) {
  write_file(src_ + "/f", noise(10'000, 1));
  archive_and_ship();
  const std::string garbage = "not a zstd frame at all";
  ASSERT_TRUE(packs()->put_file("catalog/99999999999999999999.db.zst", garbage));
  auto store = Store::open_shipped(packs(), cache_, kBudget);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().find("catalog/99999999999999999999.db.zst"), std::string::npos)
      << store.error();
  EXPECT_NE(store.error().find("damaged"), std::string::npos) << store.error();
  for (const auto& entry : fs::directory_iterator(cache_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("catalog-")) << entry.path();
    EXPECT_FALSE(entry.path().filename().string().starts_with("tmp-")) << entry.path();
  }
}

}  // namespace
}  // namespace tw::objstore
