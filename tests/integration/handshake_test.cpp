// The READY handshake between the real monitor and the real scheduler, on a real database.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "db/queue.hpp"
#include "integration/monitor_fixture.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> monitor_args(const test::TempDir& dir,
                                      std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--backup-root=" + (dir / "archive").string(),
                                   "--archiver-exe=" + test::fake_archiver_exe(), "--archivers=2",
                                   "--flush-interval=0.01", "--heartbeat-interval=0.2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::int64_t enqueue(const test::TestDatabase& db, const std::string& path) {
  auto conn = db.connect();
  db::Queue q(conn);
  return q.enqueue(std::vector<db::NewItem>{{Op::Update, path, "", "", 0, {}, {}}}).at(0);
}

std::string status_of(const test::TestDatabase& db, std::int64_t id) {
  return db.scalar(fmt::format("SELECT status FROM timewarp.items WHERE id = {}", id));
}

TEST(Handshake, WorkAddedByPlainSqlIsPickedUp) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  test::MonitorProcess monitor(db, monitor_args(dir));
  auto conn = db.connect();
  conn.exec(
      "INSERT INTO timewarp.items (op, path) SELECT 'UPDATE', '/src/f' || g FROM "
      "generate_series(1, 200) g");
  ASSERT_TRUE(test::wait_until(
      [&] {
        return db.count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'") == 200;
      },
      60s));
  EXPECT_EQ(monitor.stop(), 0);
}

// An item enqueued while the scheduler is between its last look at the queue and its READY
// must still be archived: the monitor looks again when that READY arrives.
TEST(Handshake, NoLostWakeupBetweenLastLookAndReady) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  test::TempDir hook;
  test::MonitorProcess monitor(db, monitor_args(dir),
                               {{"TIMEWARP_TEST_PAUSE_BEFORE_READY", hook.path().string()}},
                               test::hooked_scheduler_exe());
  const auto first = enqueue(db, "/src/first");
  // The scheduler drains `first`, looks at the queue a last time, and pauses before READY.
  ASSERT_TRUE(test::wait_until([&] { return std::filesystem::exists(hook / "paused"); }, 60s));
  EXPECT_EQ(status_of(db, first), "COMPLETED");
  const auto second = enqueue(db, "/src/second");  // lands in the window
  test::write_file(hook / "release", "");
  ASSERT_TRUE(test::wait_until([&] { return status_of(db, second) == "COMPLETED"; }, 30s))
      << "the item enqueued before READY was stranded";
  EXPECT_EQ(monitor.stop(), 0);
}

// A retry waits in the queue with a not_before; the monitor wakes the scheduler when it
// falls due even though nothing else happens.
TEST(Handshake, DelayedRetryIsWokenWhenDue) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  test::MonitorProcess monitor(
      db, monitor_args(dir, {"--max-attempts=3", "--retry-base-delay=0.5", "--retry-max-delay=1"}));
  const auto id = enqueue(db, "/src/retry-me");
  ASSERT_TRUE(test::wait_until([&] { return status_of(db, id) == "FAILED"; }, 60s));
  EXPECT_EQ(db.scalar(fmt::format("SELECT attempts FROM timewarp.items WHERE id = {}", id)), "3");
  EXPECT_EQ(monitor.stop(), 0);
}

TEST(Handshake, SigtermStopsCleanlyAndReturnsUnstartedWork) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  test::MonitorProcess monitor(
      db, monitor_args(dir, {"--archiver-arg=--delay-ms=20", "--batch-size=50"}));
  auto conn = db.connect();
  conn.exec(
      "INSERT INTO timewarp.items (op, path) SELECT 'UPDATE', '/src/f' || g FROM "
      "generate_series(1, 500) g");
  ASSERT_TRUE(test::wait_until(
      [&] {
        return db.count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'") > 10;
      },
      60s));
  EXPECT_EQ(monitor.stop(), 0);
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items WHERE status = 'DISPATCHED'"), 0);
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items WHERE status IN ('NEW', 'COMPLETED')"),
            500);
}

}  // namespace
}  // namespace tw
