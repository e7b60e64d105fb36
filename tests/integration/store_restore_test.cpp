// Two hosts archive into one bucket (each its monitor, sources, backup root, host_id and so
// prefix; one database serves both queues), through a gateway restart and a host killed while it
// ships; then, with both backup roots and databases gone, every source is restored from the bucket
// alone by `timewarp restore --from-store`, at the latest moment and at an earlier one, and
// compared byte for byte and in metadata (ARCHITECTURE.md, "Object store").
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/time.hpp"
#include "integration/monitor_harness.hpp"
#include "objstore/gateway.hpp"
#include "support/processes.hpp"
#include "support/tree_snapshot.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using objstore::store_configured;

struct Host {
  explicit Host(std::string name) : prefix(std::move(name)) {}
  // A host whose monitor uses the database of `other`'s.
  Host(std::string name, const Host& other)
      : prefix(std::move(name)), h(test::MonitorHarness::SameDatabase{other.h}) {}
  std::string prefix;  // its host_id, and so its prefix in the bucket
  test::MonitorHarness h;
  test::TreeSnapshot earlier;
  test::TreeSnapshot latest;
};

void start(Host& host, const objstore::BucketConfig& store) {
  host.h.start({"--archivers=1", "--ship-interval=1", "--host-id=" + host.prefix,
                "--store-endpoint=" + store.endpoint, "--store-bucket=" + store.bucket,
                "--store-region=" + store.region},
               {{"TIMEWARP_STORE_ACCESS_KEY", store.access_key},
                {"TIMEWARP_STORE_SECRET_KEY", store.secret_key}});
}

// Files of several kinds under the host's sources, `round` changing what an earlier round
// wrote.
void write_round(Host& host, int round) {
  const auto src = host.h.src();
  fs::create_directories(src / "d" / "e");
  for (int i = 0; i < 6; ++i) {
    const auto seed = static_cast<std::uint64_t>(round * 100 + i + host.prefix.size());
    test::write_file(src / "d" / fmt::format("f{}", (i + round) % 8), test::noise(150'000, seed));
  }
  test::write_file(src / "d" / "e" / fmt::format("big{}", round), test::noise(5'000'000, round));
  test::write_file(src / fmt::format("name \x01\xff {}", round), "an odd name");
  if (round == 1) {
    fs::create_symlink("d/e/big1", src / "link");
    fs::permissions(src / "d" / "f1", fs::perms(0640));
  } else {
    fs::remove(src / "d" / "e" / "big1");
    fs::remove(src / "link");
    fs::create_symlink("d/e/big2", src / "link");
  }
}

// `timewarp restore --from-store` of host's sources into `to`, at `at` (latest: empty).
int restore_from_store(const Host& host, const objstore::BucketConfig& store,
                       const std::string& cache, const std::string& to, const std::string& at) {
  std::vector<std::string> argv{"/usr/bin/env",
                                "TIMEWARP_STORE_ACCESS_KEY=" + store.access_key,
                                "TIMEWARP_STORE_SECRET_KEY=" + store.secret_key,
                                test::cli_exe(),
                                "restore",
                                "--from-store",
                                "--store-endpoint=" + store.endpoint,
                                "--store-bucket=" + store.bucket,
                                "--store-prefix=" + host.prefix,
                                "--store-region=" + store.region,
                                "--cache-dir=" + cache,
                                "--cache-size=67108864",
                                host.h.src().string(),
                                "--to",
                                to};
  if (!at.empty()) argv.push_back("--at=" + at);
  return test::run_command(argv);
}

TEST(StoreRestore, TwoHostsOnOneDatabaseRestoreFromTheBucketAloneThroughAGatewayRestartAndAKill) {
  TW_REQUIRE_DATABASE();
  TW_REQUIRE_STORE();
  objstore::Bucket bucket = objstore::fresh_bucket();
  const objstore::BucketConfig store = bucket.config();
  Host a("host-a");
  Host b("host-b", a);  // one database serves both queues
  for (Host* host : {&a, &b}) {
    start(*host, store);
    ASSERT_TRUE(host->h.wait_catchup());
    write_round(*host, 1);
  }
  for (Host* host : {&a, &b}) {
    ASSERT_TRUE(host->h.drained_for(500ms));
    host->earlier = test::snapshot_tree(host->h.src());
  }
  std::this_thread::sleep_for(1100ms);  // a whole second apart: --at takes seconds
  const std::string earlier = std::to_string(now_ns() / 1'000'000'000);
  std::this_thread::sleep_for(1100ms);

  // The gateway goes away while both ship every second, and comes back.
  for (Host* host : {&a, &b}) write_round(*host, 2);
  EXPECT_EQ(objstore::restart_gateway(3s), "");
  // Host a is killed while it ships (a run every second): the monitor and its run.
  std::vector<test::ProcessEntry> runs;
  EXPECT_TRUE(test::wait_until(
      [&] {
        runs = test::live_children(a.h.pid(), "timewarp");
        std::erase_if(runs, [](const test::ProcessEntry& p) { return p.comm != "timewarp"; });
        return !runs.empty();
      },
      20s, 5ms));
  ::kill(a.h.pid(), SIGKILL);
  for (const auto& run : runs) ::kill(run.pid, SIGKILL);
  a.h.stop();
  start(a, store);
  ASSERT_TRUE(a.h.wait_catchup());
  for (Host* host : {&a, &b}) {
    ASSERT_TRUE(host->h.drained_for(500ms));
    host->latest = test::snapshot_tree(host->h.src());
    EXPECT_EQ(host->h.stop(), 0);  // its last shipping run included
    EXPECT_EQ(host->h.failures(), "");
    fs::remove_all(host->h.archive());  // the host's disk is lost
  }

  for (const Host* host : {&a, &b}) {
    const std::string out = (a.h.dir() / ("restored-" + host->prefix)).string();
    const std::string cache = (a.h.dir() / "cache").string();
    fs::create_directories(out);
    ASSERT_EQ(restore_from_store(*host, store, cache, out + "/latest", ""), 0);
    EXPECT_EQ(test::diff_trees(host->latest, test::snapshot_tree(out + "/latest")), "")
        << host->prefix << " at the latest moment";
    ASSERT_EQ(restore_from_store(*host, store, cache, out + "/earlier", earlier), 0);
    EXPECT_EQ(test::diff_trees(host->earlier, test::snapshot_tree(out + "/earlier")), "")
        << host->prefix << " at " << earlier;
  }
}

}  // namespace
}  // namespace tw
