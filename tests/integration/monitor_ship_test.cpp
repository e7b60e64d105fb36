// The monitor's shipping schedule (ship_interval) against the real S3 gateway: what the
// archivers write reaches the bucket without anyone typing `timewarp ship`, the pack an
// archiver still appends to included (as far as it is committed).
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "integration/monitor_harness.hpp"
#include "objstore/gateway.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;
using objstore::store_configured;

using objstore::bucket_packs;
using objstore::local_packs;

// Starts the monitor with `args` and the gateway's bucket `store` under `prefix`, its keys in
// the monitor's environment.
void start_shipping(test::MonitorHarness& h, const objstore::BucketConfig& store,
                    const std::string& prefix, std::vector<std::string> args) {
  args.insert(args.end(), {"--store-endpoint=" + store.endpoint, "--store-bucket=" + store.bucket,
                           "--store-prefix=" + prefix, "--store-region=" + store.region});
  h.start(args, {{"TIMEWARP_STORE_ACCESS_KEY", store.access_key},
                 {"TIMEWARP_STORE_SECRET_KEY", store.secret_key}});
}

// Writes `count` files of incompressible content (seeds from `seed`), each archived.
void archive_files(test::MonitorHarness& h, int count, int seed) {
  for (int i = 0; i < count; ++i) {
    const auto f = h.path(fmt::format("f{}", seed + i));
    test::write_file(f, test::noise(100'000, static_cast<std::uint64_t>(seed + i)));
    ASSERT_TRUE(h.wait_done("UPDATE", f));
  }
}

TEST(MonitorShipping, ScheduledRunsShipWhatTheArchiversWrote) {
  TW_REQUIRE_DATABASE();
  TW_REQUIRE_STORE();
  objstore::Bucket bucket = objstore::fresh_bucket();
  const objstore::BucketConfig& store = bucket.config();
  test::MonitorHarness h;
  start_shipping(h, store, "host-a", {"--archivers=1", "--ship-interval=1"});
  ASSERT_TRUE(h.wait_catchup());
  archive_files(h, 3, 0);
  const bool shipped = test::wait_until(
      [&] {
        const auto here = local_packs(h.archive());
        return !here.empty() && bucket_packs(bucket, "host-a") == here;
      },
      60s, 200ms);
  EXPECT_TRUE(shipped) << test::read_file(h.log_file());
  // The run that shipped them ends: the monitor logs it once it has reaped the child.
  EXPECT_TRUE(test::wait_until(
      [&] {
        return test::read_file(h.log_file()).find("shipping run finished") != std::string::npos;
      },
      30s));
  const std::string log = test::read_file(h.log_file());
  EXPECT_EQ(log.find("shipping run failed"), std::string::npos) << log;
  EXPECT_EQ(log.find(store.secret_key), std::string::npos) << "the secret key is never logged";
  EXPECT_EQ(h.stop(), 0);
  EXPECT_EQ(h.failures(), "");
}

// A monitor that stops ships what its archivers left before it exits: with ship_interval
// far off, only that last run can have put the packs into the bucket.
TEST(MonitorShipping, AStoppingMonitorShipsWhatIsLeft) {
  TW_REQUIRE_DATABASE();
  TW_REQUIRE_STORE();
  objstore::Bucket bucket = objstore::fresh_bucket();
  const objstore::BucketConfig& store = bucket.config();
  test::MonitorHarness h;
  start_shipping(h, store, "host-b", {"--archivers=2", "--ship-interval=3600"});
  ASSERT_TRUE(h.wait_catchup());
  archive_files(h, 4, 10);
  EXPECT_TRUE(bucket_packs(bucket, "host-b").empty()) << "no run is due for an hour";
  EXPECT_EQ(h.stop(), 0);
  const auto here = local_packs(h.archive());
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(bucket_packs(bucket, "host-b"), here) << test::read_file(h.log_file());
  EXPECT_NE(test::read_file(h.log_file()).find("shipping run finished"), std::string::npos);
}

}  // namespace
}  // namespace tw
