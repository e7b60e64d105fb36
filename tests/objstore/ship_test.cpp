// Shipping an archive's packs to a real S3 gateway (ARCHITECTURE.md, "Object store";
// Store::ship): the bucket holds exactly the local sealed packs, a pack still written to
// waits, a store that does not answer delays shipping only, and nothing collection removed
// (a purged secret above all) stays in the bucket, also after a shipper killed between
// its upload and its record. Packs given back once shipped (keep_local) free the local
// disk and are read, verified and collected from the store, and never shipped from their
// holes.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/pack_cache.hpp"
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

  // Archives "before" (1 MB), "id_ed25519" (the secret it returns) and "after" (30 kB) into
  // one pack, their bytes drawn from `seed`, `seed` + 1 and `seed` + 2.
  std::string archive_secret(std::uint64_t seed) {
    Store writer = open();
    archive(writer, "before", noise(1'000'000, seed + 1));
    const std::string secret = noise(30'000, seed);
    archive(writer, "id_ed25519", secret);
    archive(writer, "after", noise(30'000, seed + 2));
    return secret;
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

  // Readers' hooks that fetch the packs given back from the bucket, into a folder of the test.
  archive::StoreHooks from_bucket() {
    archive::StoreHooks hooks;
    hooks.packs_from = std::make_shared<archive::GivenBackPacks>(
        (dir_ / "fetched").string(),
        [this]() -> archive::Expected<std::unique_ptr<archive::PackStore>> {
          auto bucket = Bucket::open(gateway(bucket_name_));
          if (!bucket) return archive::permanent(bucket.error());
          return std::unique_ptr<archive::PackStore>(
              std::make_unique<BucketPackStore>(std::move(*bucket), std::string(kPrefix)));
        },
        std::uint64_t{64} << 20);
    return hooks;
  }

  // The latest content of source file `name`, or the error reading it.
  std::string content_of(const Store& store, const std::string& name) {
    auto versions = store.versions(src_ + "/" + name);
    if (!versions || versions->empty()) return "no versions";
    std::string out(versions->back().size, '\0');
    auto read = store.read_content(versions->back(), 0, std::span<char>(out.data(), out.size()));
    if (!read) return "error: " + read.error();
    return out;
  }

  // Bytes the packs take on the local disk, and the sum of their sizes.
  std::pair<std::uint64_t, std::uint64_t> pack_bytes() const {
    std::uint64_t allocated = 0;
    std::uint64_t size = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root_ + "/packs")) {
      struct stat st {};
      if (!entry.is_regular_file() || ::stat(entry.path().c_str(), &st) != 0) continue;
      allocated += static_cast<std::uint64_t>(st.st_blocks) * 512;
      size += static_cast<std::uint64_t>(st.st_size);
    }
    return {allocated, size};
  }

  // Three packs (one writer each), two files of incompressible bytes in each.
  void three_packs() {
    for (int p = 0; p < 3; ++p) {
      Store writer = open();
      for (int f = 0; f < 2; ++f) {
        archive(writer, fmt::format("p{}f{}", p, f),
                noise(400'000, static_cast<std::uint64_t>(10 * p + f)));
      }
    }
  }

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
  const std::string secret = archive_secret(77);
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

TEST_F(ShipTest, PacksGivenBackFreeTheDiskAndAreReadAndVerifiedFromTheStore) {
  three_packs();
  const auto before = local();
  ASSERT_EQ(before.size(), 3u);
  const auto [allocated_before, size_before] = pack_bytes();
  BucketPackStore to = packs();
  ShipReport report;
  {
    Store store = open();
    // One pack's worth kept: the two shipped first go.
    ASSERT_TRUE(store.ship(to, report, allocated_before / 3 + 4096)) << report.packs_shipped;
  }
  EXPECT_EQ(report.packs_shipped, 3u);
  EXPECT_EQ(report.packs_given_back, 2u);
  auto [allocated, size] = pack_bytes();
  EXPECT_EQ(size, size_before) << "the files keep their sizes";
  EXPECT_LE(allocated, allocated_before / 3 + 4096);
  {
    // A reader without the store names what it cannot read.
    auto alone = Store::open(root_, Store::Mode::ReadOnly);
    ASSERT_TRUE(alone) << alone.error();
    int refused = 0;
    for (int p = 0; p < 3; ++p) {
      const std::string read = content_of(*alone, fmt::format("p{}f0", p));
      if (read.find("given back to the pack store") != std::string::npos) ++refused;
    }
    EXPECT_EQ(refused, 2);
  }
  {
    Store store = open(from_bucket());
    for (int p = 0; p < 3; ++p) {
      for (int f = 0; f < 2; ++f) {
        EXPECT_EQ(content_of(store, fmt::format("p{}f{}", p, f)),
                  noise(400'000, static_cast<std::uint64_t>(10 * p + f)))
            << p << f;
      }
    }
    const auto verified = store.verify();
    EXPECT_TRUE(verified.ok()) << (verified.problems.empty() ? "" : verified.problems.front());
    EXPECT_EQ(verified.unreferenced_objects, 0u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "fetched")) << "removed with the archive";
  // Every pack given back: nothing is shipped again, from a hole above all.
  ShipReport again;
  {
    Store store = open();
    ASSERT_TRUE(store.ship(to, again, 1));
  }
  EXPECT_EQ(again.packs_shipped, 0u);
  EXPECT_EQ(again.packs_given_back, 1u);
  EXPECT_EQ(shipped(), before) << "the bucket holds the packs as they were";
  EXPECT_EQ(pack_bytes().first, 0u);
}

// A reader that opened a pack before it was given back goes on reading it: the file was
// replaced, not emptied, and its descriptor still reads the old one.
TEST_F(ShipTest, AReaderThatOpenedAPackBeforeItWasGivenBackReadsItWhole) {
  {
    Store writer = open();
    archive(writer, "a", noise(300'000, 1));
    archive(writer, "b", noise(300'000, 2));
  }
  auto reader = Store::open(root_, Store::Mode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  EXPECT_EQ(content_of(*reader, "a"), noise(300'000, 1));
  BucketPackStore to = packs();
  ShipReport report;
  {
    Store store = open();
    ASSERT_TRUE(store.ship(to, report, 1));
  }
  ASSERT_EQ(report.packs_given_back, 1u);
  EXPECT_EQ(content_of(*reader, "b"), noise(300'000, 2));
}

TEST_F(ShipTest, ACollectionRewritesAGivenBackPackFromTheStoreSoAPurgeLeavesNoByte) {
  const std::string secret = archive_secret(91);
  BucketPackStore to = packs();
  ShipReport first;
  {
    Store store = open();
    ASSERT_TRUE(store.ship(to, first, 1));
  }
  ASSERT_EQ(first.packs_given_back, 1u);
  {
    // Without the store, the collection cannot copy the pack's live blobs: it says so.
    Store store = open();
    ASSERT_TRUE(store.purge(src_ + "/id_ed25519", false));
    auto refused = store.collect({});
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("given back"), std::string::npos) << refused.error();
  }
  {
    Store store = open(from_bucket());
    CollectOptions one;
    one.rounds = 1;
    auto collected = store.collect(one);
    ASSERT_TRUE(collected) << collected.error();
    EXPECT_EQ(collected->packs_rewritten, 1u);
    EXPECT_EQ(content_of(store, "before"), noise(1'000'000, 92));
  }
  ShipReport second;
  {
    Store store = open();
    ASSERT_TRUE(store.ship(to, second, 1));
  }
  EXPECT_EQ(second.packs_removed, 1u);
  EXPECT_EQ(second.packs_shipped, 1u);
  EXPECT_FALSE(any_holds(shipped(), secret.substr(1000, 64)));
  EXPECT_FALSE(any_holds(local(), secret.substr(1000, 64)));
  Store store = open(from_bucket());
  EXPECT_EQ(content_of(store, "after"), noise(30'000, 93));
}

// Shipped to one store and given back, a pack cannot be shipped to another from its hole:
// the run fails, naming it, and the other bucket gets no pack of zeros.
TEST_F(ShipTest, AGivenBackPackIsNeverShippedFromItsHole) {
  {
    Store writer = open();
    archive(writer, "a", noise(200'000, 5));
  }
  BucketPackStore to = packs();
  ShipReport report;
  {
    Store store = open();
    ASSERT_TRUE(store.ship(to, report, 1));
  }
  ASSERT_EQ(report.packs_given_back, 1u);
  const std::string other_name = fresh_bucket().config().bucket;
  BucketPackStore other = packs(gateway(other_name));
  ShipReport refused;
  Store store = open();
  const auto failed = store.ship(other, refused);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.fault().outcome, tw::Outcome::FailedPermanent) << failed.error();
  EXPECT_NE(failed.error().find("given back"), std::string::npos) << failed.error();
  EXPECT_EQ(refused.packs_shipped, 0u);
  auto bucket = Bucket::open(gateway(other_name));
  ASSERT_TRUE(bucket);
  EXPECT_TRUE(bucket_packs(*bucket, std::string(kPrefix)).empty());
}

}  // namespace
}  // namespace tw::objstore
