// The scheduler under trouble: a second scheduler that dies, live resizing under load, the
// database connection cut in the middle of a drain, pacing, a backlog that keeps growing.
#include <gtest/gtest.h>

#include <csignal>

#include "integration/scheduler_fixture.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

TEST(SchedulerFaults, ExpiredLeasesOfADeadSchedulerAreRecoveredByALiveOne) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  f.fill(400);
  const std::vector<std::string> common = {"--archivers=2", "--batch-size=50", "--lease-time=1",
                                           "--archiver-arg=--delay-ms=10"};
  auto doomed = f.start(common);
  auto survivor = f.start(common);
  ASSERT_TRUE(doomed->write_line("READY"));
  ASSERT_TRUE(test::wait_until([&] { return f.count("status = 'COMPLETED'") >= 40; }, 60s));
  ::kill(doomed->pid(), SIGKILL);  // it holds claimed items it will never finish
  doomed->wait_exit(10s);
  ASSERT_GT(f.count("status = 'DISPATCHED'"), 0);
  // The survivor drains; expired leases come back as NEW, so ask again until all is done.
  ASSERT_TRUE(test::wait_until([&] {
    if (!test::drain_once(*survivor, 60s)) return false;
    return f.count("status = 'COMPLETED'") == 400;
  }, 120s, 50ms)) << f.count("status = 'COMPLETED'") << " completed";
  EXPECT_GT(f.count("attempts = 1 AND last_error LIKE 'lease of scheduler % expired'"), 0);
  const auto runs = f.runs();
  EXPECT_EQ(runs.size(), 400u);  // every item ran; a few twice (at-least-once)
  ASSERT_TRUE(survivor->write_line("STOP"));
  EXPECT_EQ(survivor->wait_exit(30s), 0);
}

TEST(SchedulerFaults, ResizeUpAndDownUnderLoad) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  f.fill(600);
  auto scheduler = f.start({"--archivers=1", "--batch-size=20", "--archiver-arg=--delay-ms=5"});
  ASSERT_TRUE(scheduler->write_line("READY"));
  ASSERT_TRUE(test::wait_until([&] { return f.count("status = 'COMPLETED'") >= 50; }, 60s));
  ASSERT_TRUE(scheduler->write_line("ARCHIVERS 4"));
  ASSERT_TRUE(test::wait_until([&] {
    return db.count("SELECT busy_high_water FROM timewarp.schedulers") >= 3;
  }, 60s)) << "the new archivers never worked";
  ASSERT_TRUE(scheduler->write_line("ARCHIVERS 1"));
  std::string line;
  ASSERT_EQ(scheduler->read_line(line, 120s), ChildProcess::ReadStatus::Line);
  EXPECT_EQ(line, "READY");
  EXPECT_EQ(f.count("status = 'COMPLETED'"), 600);
  for (const auto& [id, n] : f.runs()) EXPECT_EQ(n, 1) << "item " << id << " ran " << n << " times";
  EXPECT_EQ(f.runs().size(), 600u);
  ASSERT_TRUE(test::wait_until([&] { return db.count("SELECT archivers FROM timewarp.schedulers") == 1; }, 10s));
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

TEST(SchedulerFaults, ConnectionsCutMidDrainLoseNothingAndMarkNothingTwice) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  f.fill(2000);
  auto scheduler = f.start({"--archivers=2", "--batch-size=100", "--archiver-arg=--delay-ms=1"});
  ASSERT_TRUE(scheduler->write_line("READY"));
  auto admin = db.connect();
  const auto cut = [&] {
    admin.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()");
  };
  for (int threshold : {200, 700, 1200}) {
    ASSERT_TRUE(test::wait_until([&] { return f.count("status = 'COMPLETED'") >= threshold; }, 120s));
    cut();
  }
  std::string line;
  ASSERT_EQ(scheduler->read_line(line, 180s), ChildProcess::ReadStatus::Line);
  EXPECT_EQ(line, "READY");
  EXPECT_EQ(f.count("status = 'COMPLETED'"), 2000);
  for (const auto& [id, n] : f.runs()) EXPECT_EQ(n, 1) << "item " << id << " ran " << n << " times";
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

TEST(SchedulerFaults, BandwidthLimitPacesDispatch) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  f.fill(12);
  // Each item reports 250 kB added; at 1 MB/s, 12 items (3 MB) need at least ~2 s beyond
  // the one second of burst credit.
  auto scheduler = f.start({"--archivers=2", "--max-bandwidth=1000000",
                            "--archiver-arg=--bytes=250000"});
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(test::drain_once(*scheduler, 60s));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(f.count("status = 'COMPLETED'"), 12);
  EXPECT_GE(elapsed, 1500ms);
  EXPECT_EQ(db.count("SELECT sum(archive_bytes) FROM timewarp.items"), 12 * 250000);
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

TEST(SchedulerFaults, OldCompletedItemsArePrunedPeriodically) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  f.fill(300);
  auto scheduler = f.start({"--archivers=2", "--prune-age=0.5", "--prune-interval=0.2"});
  ASSERT_TRUE(test::drain_once(*scheduler, 60s));
  ASSERT_TRUE(test::wait_until([&] { return f.count("true") == 0; }, 30s))
      << f.count("true") << " items left";
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

// Claimable items past `backlog_warning`, and more of them at the next heartbeat, are
// logged as a warning; a backlog under the threshold is not.
TEST(SchedulerFaults, BacklogGrowingPastTheThresholdIsWarnedAbout) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  const std::string log = (f.dir() / "scheduler.log").string();
  // No READY is sent: nothing is claimed, the backlog only grows.
  auto scheduler = f.start({"--archivers=1", "--backlog-warning=50", "--log-file=" + log});
  const auto heartbeat_ms = [&] {
    return db.count(
        "SELECT coalesce(max((extract(epoch FROM heartbeat_at) * 1000)::bigint), 0) "
        "FROM timewarp.schedulers");
  };
  // Waits until the scheduler has beaten `n` more times (it looks at the backlog then).
  const auto beats = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const auto before = heartbeat_ms();
      if (!test::wait_until([&] { return heartbeat_ms() > before; }, 30s)) return false;
    }
    return true;
  };
  const auto warned = [&] {
    return test::read_file(log).find("backlog growing") != std::string::npos;
  };
  f.fill(30);
  ASSERT_TRUE(beats(3));
  EXPECT_FALSE(warned()) << "30 claimable items are under the threshold of 50";
  f.fill(100, "/src/more");
  ASSERT_TRUE(beats(1));
  ASSERT_TRUE(test::wait_until(warned, 30s)) << test::read_file(log);
  EXPECT_NE(test::read_file(log).find("130 claimable items (warning threshold 50)"),
            std::string::npos)
      << test::read_file(log);
  EXPECT_EQ(f.count("status = 'NEW'"), 130);
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

// A signal line longer than the scheduler reads is ignored whole: its tail, even one that
// reads like a command, is not taken as a line of its own.
TEST(SchedulerFaults, TheTailOfAnOverlongSignalLineIsNotObeyed) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  const std::string log = (f.dir() / "scheduler.log").string();
  auto scheduler = f.start({"--archivers=1", "--log-file=" + log});
  // Two pipe pages of X, then "STOP": the scheduler reads the line in pieces.
  ASSERT_TRUE(scheduler->write_line(std::string(8192, 'X') + "STOP"));
  ASSERT_TRUE(test::wait_until(
      [&] { return test::read_file(log).find("over-long signal line") != std::string::npos; }, 30s))
      << test::read_file(log);
  f.fill(5);
  ASSERT_TRUE(test::drain_once(*scheduler, 60s)) << test::read_file(log);
  EXPECT_EQ(f.count("status = 'COMPLETED'"), 5);
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

}  // namespace
}  // namespace tw
