// The monitor's shipping schedule (ship_interval) against the real S3 gateway: what the
// archivers write reaches the bucket without anyone typing `timewarp ship`, the pack an
// archiver still appends to included (as far as it is committed); and what each host's
// monitor publishes of it for `timewarp status`.
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "integration/monitor_harness.hpp"
#include "objstore/gateway.hpp"
#include "support/tree_snapshot.hpp"

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

// `timewarp status --json` on the database `h` uses, with no backup root of its own.
nlohmann::json status_json(const test::MonitorHarness& h) {
  std::string out;
  const int status = test::run_command(
      {test::cli_exe(), "--no-config", "--database=" + h.db().conninfo(), "status", "--json"},
      &out);
  EXPECT_EQ(status, 0) << out;
  return nlohmann::json::parse(out, nullptr, false);
}

// The host `id` of a status document (null when absent).
nlohmann::json host_of(const nlohmann::json& status, const std::string& id) {
  if (!status.is_object() || !status.contains("hosts")) return nullptr;
  for (const auto& host : status["hosts"]) {
    if (host["host_id"] == id) return host;
  }
  return nullptr;
}

// Two hosts on one database, one shipping every second and one whose store does not answer:
// `timewarp status` anywhere shows each host's queue, its monitor, what it has not shipped
// and why, from the monitors' rows.
TEST(MonitorShipping, StatusShowsEveryHostsQueueAndShipping) {
  TW_REQUIRE_DATABASE();
  TW_REQUIRE_STORE();
  objstore::Bucket bucket = objstore::fresh_bucket();
  const objstore::BucketConfig& store = bucket.config();
  test::MonitorHarness a;
  test::MonitorHarness b(test::MonitorHarness::SameDatabase{a});
  start_shipping(a, store, "host-a", {"--archivers=1", "--ship-interval=1", "--host-id=a"});
  objstore::BucketConfig down = store;
  down.endpoint = "http://127.0.0.1:9";  // nothing listens there
  start_shipping(b, down, "host-b", {"--archivers=1", "--ship-interval=1", "--host-id=b"});
  ASSERT_TRUE(a.wait_catchup());
  ASSERT_TRUE(b.wait_catchup());
  archive_files(a, 3, 0);
  archive_files(b, 2, 20);
  nlohmann::json status;
  const bool shown = test::wait_until(
      [&] {
        status = status_json(a);
        const auto ha = host_of(status, "a");
        const auto hb = host_of(status, "b");
        return ha.is_object() && hb.is_object() && ha["shipping"].is_object() &&
               hb["shipping"].is_object() && ha["queue"]["completed"].get<int>() >= 3 &&
               hb["queue"]["completed"].get<int>() >= 2 && ha["shipping"]["packs_pending"] == 0 &&
               !ha["shipping"]["catalog_shipped_age_seconds"].is_null() &&
               hb["shipping"]["packs_pending"].get<int>() >= 1 &&
               hb["shipping"]["error"].is_string();
      },
      60s, 300ms);
  ASSERT_TRUE(shown) << status.dump(2) << test::read_file(b.log_file());
  const auto ha = host_of(status, "a");
  const auto hb = host_of(status, "b");
  EXPECT_EQ(ha["shipping"]["store"], store.endpoint + "/" + store.bucket + "/host-a");
  EXPECT_TRUE(ha["shipping"]["error"].is_null()) << ha.dump(2);
  EXPECT_TRUE(ha["monitor"]["alive"].get<bool>());
  EXPECT_EQ(ha["monitor"]["pid"], a.pid());
  EXPECT_EQ(hb["shipping"]["store"], "http://127.0.0.1:9/" + store.bucket + "/host-b");
  EXPECT_TRUE(hb["shipping"]["catalog_shipped_age_seconds"].is_null());
  EXPECT_GE(hb["shipping"]["bytes_pending"].get<std::int64_t>(), 200'000);
  EXPECT_NE(hb["shipping"]["error"].get<std::string>().find("no answer from http://127.0.0.1:9"),
            std::string::npos)
      << hb.dump(2);
  EXPECT_EQ(hb["queue"]["waiting"], 0);

  // The text names both hosts, b's backlog and why it is not shipped.
  std::string text;
  ASSERT_EQ(test::run_command({test::cli_exe(), "--no-config", "--database=" + a.db().conninfo(),
                               "status", "--color=never"},
                              &text),
            0);
  EXPECT_NE(text.find("hosts       2 on this database"), std::string::npos) << text;
  EXPECT_NE(text.find("http://127.0.0.1:9/" + store.bucket + "/host-b: "), std::string::npos)
      << text;
  EXPECT_NE(text.find("not shipped yet"), std::string::npos) << text;
  EXPECT_EQ(text.find(store.secret_key), std::string::npos);

  // A stopped monitor's row says so, and keeps what it last read.
  EXPECT_EQ(b.stop(), 0);
  status = status_json(a);
  EXPECT_TRUE(host_of(status, "b")["monitor"]["stopped"].get<bool>()) << status.dump(2);
  EXPECT_GE(host_of(status, "b")["shipping"]["packs_pending"].get<int>(), 1);
  EXPECT_EQ(a.stop(), 0);
}

// Bytes the archive's pack files take on the disk.
std::uint64_t allocated_pack_bytes(const std::string& archive) {
  std::uint64_t allocated = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(archive + "/packs")) {
    struct stat st {};
    if (entry.is_regular_file() && ::stat(entry.path().c_str(), &st) == 0) {
      allocated += static_cast<std::uint64_t>(st.st_blocks) * 512;
    }
  }
  return allocated;
}

// A monitor with local_packs_size: once shipped, its packs are given back (the last ones
// by the run when it stops), and `timewarp restore` and `verify` on the host, without
// --from-store, read them from the bucket; `status` counts them.
TEST(MonitorShipping, PacksGivenBackAreRestoredAndVerifiedFromTheBucket) {
  TW_REQUIRE_DATABASE();
  TW_REQUIRE_STORE();
  objstore::Bucket bucket = objstore::fresh_bucket();
  const objstore::BucketConfig& store = bucket.config();
  test::MonitorHarness h;
  start_shipping(h, store, "host-g",
                 {"--archivers=2", "--ship-interval=1", "--local-packs-size=1"});
  ASSERT_TRUE(h.wait_catchup());
  archive_files(h, 4, 40);
  EXPECT_EQ(h.stop(), 0);
  ASSERT_FALSE(local_packs(h.archive()).empty());
  EXPECT_EQ(allocated_pack_bytes(h.archive()), 0u) << test::read_file(h.log_file());
  EXPECT_NE(test::read_file(h.log_file()).find("of the local disk"), std::string::npos);
  const std::vector<std::string> store_args{
      "--backup-root=" + h.archive(),   "--store-endpoint=" + store.endpoint,
      "--store-bucket=" + store.bucket, "--store-prefix=host-g",
      "--store-region=" + store.region, "--cache-dir=" + (h.dir() / "cache").string()};
  const std::vector<std::pair<std::string, std::string>> keys{
      {"TIMEWARP_STORE_ACCESS_KEY", store.access_key},
      {"TIMEWARP_STORE_SECRET_KEY", store.secret_key}};
  const auto run = [&](std::vector<std::string> args, std::string* out) {
    std::vector<std::string> argv{test::cli_exe(), "--no-config"};
    argv.insert(argv.end(), store_args.begin(), store_args.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_command(argv, out, keys);
  };
  const auto to = h.dir() / "restored";
  std::string out;
  ASSERT_EQ(run({"restore", h.src().string(), "--to", to.string()}, &out), 0) << out;
  EXPECT_EQ(test::diff_trees(test::snapshot_tree(h.src()), test::snapshot_tree(to)), "");
  EXPECT_EQ(run({"verify"}, &out), 0) << out;
  ASSERT_EQ(run({"--database=" + h.db().conninfo(), "status", "--json"}, &out), 0) << out;
  const auto doc = nlohmann::json::parse(out, nullptr, false);
  EXPECT_EQ(doc["archive"]["given_back_files"], local_packs(h.archive()).size()) << out;
  EXPECT_EQ(allocated_pack_bytes(h.archive()), 0u) << "readers never fill the backup root";
  ASSERT_TRUE(std::filesystem::exists(h.dir() / "cache")) << "the restore read the bucket";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(h.dir() / "cache")) {
    EXPECT_FALSE(entry.is_regular_file()) << entry.path() << ": the readers' files are removed";
  }
}

}  // namespace
}  // namespace tw
