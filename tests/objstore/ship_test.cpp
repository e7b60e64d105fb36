// Shipping an archive's packs to a real S3 gateway (ARCHITECTURE.md, "Object store";
// Store::ship): the bucket holds exactly the local sealed packs, a pack still written to
// waits, a store that does not answer delays shipping only, and nothing collection removed
// (a purged secret above all) stays in the bucket, also after a shipper killed between
// its upload and its record.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/store.hpp"
#include "objstore/gateway.hpp"
#include "objstore/pack_store.hpp"
#include "support/test_support.hpp"

namespace tw::objstore {
namespace {

using archive::CollectOptions;
using archive::ShipReport;
using archive::Store;
using test::noise;
using test::read_file;
using test::TempDir;
using test::write_file;

constexpr std::string_view kPrefix = "host-a";

class ShipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_REQUIRE_STORE();
    std::filesystem::create_directories(src_);
    bucket_name_ = fresh_bucket().config().bucket;
  }

  Store open(archive::StoreHooks hooks = {}) {
    auto store = Store::open(root_, Store::Mode::ReadWrite, std::move(hooks));
    EXPECT_TRUE(store) << (store ? "" : store.error());
    return std::move(store.value());
  }

  void archive(Store& store, const std::string& name, const std::string& content) {
    write_file(src_ + "/" + name, content);
    const auto result = store.update(src_ + "/" + name);
    ASSERT_EQ(result.outcome, tw::Outcome::Complete) << result.message;
  }

  // Purges source file `name` and collects: the one pack that held it is rewritten.
  void purge(Store& store, const std::string& name) {
    ASSERT_TRUE(store.purge(src_ + "/" + name, false));
    CollectOptions one;
    one.rounds = 1;
    auto collected = store.collect(one);
    ASSERT_TRUE(collected) << collected.error();
    ASSERT_EQ(collected->packs_rewritten, 1u);
  }

  BucketPackStore packs(BucketConfig config) {
    auto bucket = Bucket::open(std::move(config));
    EXPECT_TRUE(bucket) << (bucket ? "" : bucket.error());
    return BucketPackStore(std::move(bucket.value()), std::string(kPrefix));
  }
  BucketPackStore packs() { return packs(gateway(bucket_name_)); }

  // The store packs() ships to, as the archive's records name it.
  std::string where() const { return objstore::where(gateway(bucket_name_), kPrefix); }

  // Ships with a store of its own: what it did, and whether it failed.
  archive::Done ship(BucketPackStore& to, ShipReport& report) {
    Store store = open();
    return store.ship(to, report);
  }

  // The bucket's packs by name, and the archive's.
  std::map<std::string, std::string> shipped() {
    auto bucket = Bucket::open(gateway(bucket_name_));
    EXPECT_TRUE(bucket) << (bucket ? "" : bucket.error());
    return bucket_packs(*bucket, std::string(kPrefix));
  }
  std::map<std::string, std::string> local() { return local_packs(root_); }

  static bool any_holds(const std::map<std::string, std::string>& objects,
                        const std::string& needle) {
    for (const auto& [name, bytes] : objects) {
      if (bytes.find(needle) != std::string::npos) return true;
    }
    return false;
  }

  TempDir dir_;
  std::string src_ = (dir_ / "src").string();
  std::string root_ = (dir_ / "archive").string();
  std::string bucket_name_;
};

TEST_F(ShipTest, TheBucketHoldsThePacksByteForByteEachShippedOnceWhole) {
  BucketPackStore to = packs();
  {
    Store writer = open();
    for (int i = 0; i < 10; ++i) archive(writer, fmt::format("f{}", i), noise(50'000, i));
    auto backlog = writer.ship_backlog(where());
    ASSERT_TRUE(backlog) << backlog.error();
    EXPECT_EQ(backlog->packs, 1u);
    EXPECT_GE(backlog->bytes, 10u * 50'000);
    EXPECT_TRUE(backlog->oldest_ns.has_value());
    EXPECT_FALSE(backlog->catalog_shipped_ns.has_value()) << "nothing shipped yet";
    // The writer's pack, which it still appends to: its committed records are shipped.
    ShipReport busy;
    ASSERT_TRUE(ship(to, busy));
    EXPECT_EQ(busy.packs_busy, 1u);
    EXPECT_EQ(busy.packs_shipped, 1u);
    EXPECT_EQ(shipped(), local());
    for (int i = 10; i < 20; ++i) archive(writer, fmt::format("f{}", i), noise(50'000, i));
    ShipReport grown;
    ASSERT_TRUE(ship(to, grown));
    EXPECT_EQ(grown.packs_shipped, 1u) << "a pack that grew is shipped again";
    EXPECT_EQ(grown.bytes_shipped, local().begin()->second.size());
    EXPECT_EQ(shipped(), local());
  }
  ShipReport again;
  ASSERT_TRUE(ship(to, again));
  EXPECT_EQ(again.packs_shipped, 0u) << "a pack the store holds whole is not shipped again";
  EXPECT_TRUE(again.catalog_unchanged) << "nor the catalog when it would restore the same";
  EXPECT_TRUE(again.catalog.empty());
  Store store = open();
  auto backlog = store.ship_backlog(where());
  ASSERT_TRUE(backlog) << backlog.error();
  EXPECT_EQ(backlog->packs, 0u);
  EXPECT_EQ(backlog->shipped_packs, 1u);
  EXPECT_TRUE(backlog->last_shipped_ns.has_value());
  ASSERT_TRUE(backlog->catalog_shipped_ns.has_value()) << "each run ships the catalog";
  EXPECT_GE(*backlog->catalog_shipped_ns, *backlog->last_shipped_ns);
  auto elsewhere = store.ship_backlog(where() + "-elsewhere");
  ASSERT_TRUE(elsewhere) << elsewhere.error();
  EXPECT_FALSE(elsewhere->catalog_shipped_ns.has_value()) << "that record is about another store";
}

TEST_F(ShipTest, AnotherStoreGetsEveryPackAgain) {
  {
    Store writer = open();
    for (int i = 0; i < 5; ++i) archive(writer, fmt::format("f{}", i), noise(40'000, i));
  }
  BucketPackStore to = packs();
  ShipReport first;
  ASSERT_TRUE(ship(to, first));
  ASSERT_EQ(first.packs_shipped, 1u);
  Bucket other_bucket = fresh_bucket();
  BucketPackStore other(std::move(other_bucket), "host-b");
  {
    Store store = open();
    auto backlog = store.ship_backlog(other.where());
    ASSERT_TRUE(backlog) << backlog.error();
    EXPECT_EQ(backlog->packs, 1u) << "nothing is in the other store yet";
  }
  ShipReport moved;
  ASSERT_TRUE(ship(other, moved));
  EXPECT_EQ(moved.packs_shipped, 1u) << "the records were about the first store";
  Store store = open();
  auto backlog = store.ship_backlog(other.where());
  ASSERT_TRUE(backlog) << backlog.error();
  EXPECT_EQ(backlog->packs, 0u);
  backlog = store.ship_backlog(where());
  ASSERT_TRUE(backlog) << backlog.error();
  EXPECT_EQ(backlog->packs, 1u) << "the records are the other store's now";
}

TEST_F(ShipTest, AStoreThatDoesNotAnswerDelaysShippingAndLosesNothing) {
  {
    Store writer = open();
    for (int i = 0; i < 5; ++i) archive(writer, fmt::format("f{}", i), noise(40'000, i));
  }
  BucketConfig down = gateway(bucket_name_);
  down.endpoint = "http://127.0.0.1:9";  // nothing listens there
  down.connect_timeout = std::chrono::milliseconds(500);
  BucketPackStore unreachable = packs(down);
  ShipReport report;
  const auto failed = ship(unreachable, report);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.fault().outcome, tw::Outcome::FailedRetry) << failed.error();
  EXPECT_NE(failed.error().find("127.0.0.1:9"), std::string::npos) << failed.error();
  EXPECT_EQ(report.packs_shipped, 0u);
  {
    Store store = open();
    auto backlog = store.ship_backlog(where());
    ASSERT_TRUE(backlog) << backlog.error();
    EXPECT_EQ(backlog->packs, 1u) << "a pack whose upload failed is still to ship";
    // Archiving goes on meanwhile.
    archive(store, "later", noise(10'000, 99));
  }
  BucketPackStore to = packs();
  ShipReport shipped_now;
  ASSERT_TRUE(ship(to, shipped_now));
  EXPECT_EQ(shipped_now.packs_shipped, 2u);
  EXPECT_EQ(shipped(), local());
}

TEST_F(ShipTest, APurgedSecretLeavesNoByteInTheBucket) {
  const std::string secret = noise(30'000, 77);
  {
    Store writer = open();
    archive(writer, "before", noise(1'000'000, 78));
    archive(writer, "id_ed25519", secret);
    archive(writer, "after", noise(30'000, 79));
  }
  BucketPackStore to = packs();
  ShipReport first;
  ASSERT_TRUE(ship(to, first));
  ASSERT_TRUE(any_holds(shipped(), secret.substr(1000, 64)));
  {
    Store store = open();
    purge(store, "id_ed25519");
    auto backlog = store.ship_backlog(where());
    ASSERT_TRUE(backlog) << backlog.error();
    EXPECT_EQ(backlog->removals, 1u) << "the rewritten pack is to go from the store";
  }
  ShipReport second;
  ASSERT_TRUE(ship(to, second));
  EXPECT_EQ(second.packs_removed, 1u);
  EXPECT_EQ(second.packs_shipped, 1u);
  const auto in_bucket = shipped();
  EXPECT_FALSE(any_holds(in_bucket, secret.substr(1000, 64)));
  EXPECT_EQ(in_bucket, local());
}

TEST_F(ShipTest, AShipperKilledBetweenItsUploadAndItsRecordLeavesNoPurgedByteBehind) {
  const std::string secret = noise(30'000, 81);
  {
    Store writer = open();
    archive(writer, "before", noise(1'000'000, 82));
    archive(writer, "token", secret);
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    archive::StoreHooks hooks;
    hooks.before_write_step = [](std::string_view step) {
      if (step == "ship-record") ::_exit(3);
    };
    auto store = Store::open(root_, Store::Mode::ReadWrite, std::move(hooks));
    auto bucket = Bucket::open(gateway(bucket_name_));
    if (!store || !bucket) ::_exit(1);
    BucketPackStore to(std::move(bucket.value()), std::string(kPrefix));
    ShipReport report;
    (void)store->ship(to, report);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 3) << "killed after its upload, before its record";
  ASSERT_TRUE(any_holds(shipped(), secret.substr(1000, 64))) << "the upload happened";
  {
    Store store = open();
    auto backlog = store.ship_backlog(where());
    ASSERT_TRUE(backlog) << backlog.error();
    EXPECT_EQ(backlog->packs, 1u) << "an upload not recorded is not counted as shipped";
    purge(store, "token");
  }
  BucketPackStore to = packs();
  ShipReport report;
  ASSERT_TRUE(ship(to, report));
  EXPECT_EQ(report.packs_removed, 1u);
  const auto in_bucket = shipped();
  EXPECT_FALSE(any_holds(in_bucket, secret.substr(1000, 64)));
  EXPECT_EQ(in_bucket, local());
}

}  // namespace
}  // namespace tw::objstore
