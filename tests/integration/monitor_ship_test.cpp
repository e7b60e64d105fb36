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

// The packs under `root`, by name.
std::map<std::string, std::string> local_packs(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root + "/packs")) {
    if (entry.is_regular_file()) out[entry.path().stem().string()] = test::read_file(entry.path());
  }
  return out;
}

// The packs in `bucket` under `prefix`/packs/, by name (nothing when it cannot be read).
std::map<std::string, std::string> bucket_packs(objstore::Bucket& bucket,
                                                const std::string& prefix) {
  std::map<std::string, std::string> out;
  const std::string under = prefix + "/packs/";
  auto listed = bucket.list(under);
  if (!listed) return out;
  for (const auto& object : *listed) {
    auto bytes = bucket.get(object.key);
    if (bytes) out[object.key.substr(under.size())] = *bytes;
  }
  return out;
}

TEST(MonitorShipping, ScheduledRunsShipWhatTheArchiversWrote) {
  TW_REQUIRE_DATABASE();
  TW_REQUIRE_STORE();
  objstore::Bucket bucket = objstore::fresh_bucket();
  const objstore::BucketConfig& store = bucket.config();
  test::MonitorHarness h;
  h.start(
      {"--archivers=1", "--ship-interval=1", "--store-endpoint=" + store.endpoint,
       "--store-bucket=" + store.bucket, "--store-prefix=host-a", "--store-region=" + store.region},
      {{"TIMEWARP_STORE_ACCESS_KEY", store.access_key},
       {"TIMEWARP_STORE_SECRET_KEY", store.secret_key}});
  ASSERT_TRUE(h.wait_catchup());
  for (int i = 0; i < 3; ++i) {
    const auto f = h.path(fmt::format("f{}", i));
    test::write_file(f, test::noise(100'000, i));
    ASSERT_TRUE(h.wait_done("UPDATE", f));
  }
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

}  // namespace
}  // namespace tw
