// The monitor keeps the suite running: a scheduler killed mid-drain is restarted and every
// item still ends COMPLETED; SIGHUP and `timewarp archivers N` resize the archiver pool.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "integration/monitor_harness.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::int64_t live_scheduler_pid(const test::TestDatabase& db) {
  const auto pid = db.scalar(
      "SELECT pid FROM timewarp.schedulers WHERE stopped_at IS NULL "
      "AND heartbeat_at > now() - interval '2 seconds' ORDER BY id DESC LIMIT 1");
  return pid.empty() ? 0 : std::stoll(pid);
}

// A claimable item whose wake-up never came (here: inserted with the queue's triggers, and
// so its notification, switched off) is still archived: while the scheduler is idle the
// monitor looks at the queue every heartbeat.
TEST(MonitorSupervision, AClaimableItemWhoseWakeUpWentMissingIsStillArchived) {
  TW_REQUIRE_DATABASE();
  test::MonitorHarness h;
  h.start();
  ASSERT_TRUE(h.wait_catchup());
  // Outside the watched source, so that the monitor does not see it written either.
  const std::string path = (h.dir() / "elsewhere/unannounced").string();
  test::write_file(path, "no notification came for me");
  ASSERT_TRUE(test::wait_until([&] { return h.open_items() == 0; }, 30s));
  {
    auto conn = h.db().connect();
    conn.exec("SET session_replication_role = replica");  // no triggers, no NOTIFY
    conn.query("INSERT INTO timewarp.items (op, path, source_root) VALUES ('UPDATE', $1, '')",
               escape_bytes(path));
  }
  ASSERT_TRUE(h.wait_done("UPDATE", path, 1, 30s));
  EXPECT_EQ(h.restore(path), "no notification came for me");
  EXPECT_EQ(h.stop(), 0);
}

TEST(MonitorSupervision, SchedulerKilledMidDrainIsRestartedAndEveryItemCompletes) {
  TW_REQUIRE_DATABASE();
  test::MonitorHarness h;
  // A folder each: the catch-up queues a folder's entries as one SCAN, and the drain must
  // be made of many items to be killed in its middle. The archivers are the real ones
  // behind a proxy that spends 10 ms on each request, so that the drain lasts at least
  // 2.5 s on any machine (without it, a fast one drained all in the time a loaded one took
  // to look at the queue once).
  constexpr int kFiles = 1000;
  for (int i = 0; i < kFiles; ++i)
    test::write_file(h.path(fmt::format("d{}/f{}", i, i)), fmt::format("{}", i));
  h.start({"--archivers=4", "--batch-size=50", "--lease-time=2",
           std::string("--archiver-exe=") + TW_FAULT_ARCHIVER_EXE,
           "--archiver-arg=--fault-real=" + test::archiver_exe(),
           "--archiver-arg=--fault-delay-ms=10"});
  ASSERT_TRUE(h.wait_catchup());
  const auto total = h.db().count("SELECT count(*) FROM timewarp.items");
  ASSERT_GE(total, kFiles);
  const auto completed = [&] {
    return h.db().count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'");
  };
  ASSERT_TRUE(test::wait_until([&] { return completed() >= 100; }, 60s));
  const auto victim = live_scheduler_pid(h.db());
  ASSERT_GT(victim, 0);
  ASSERT_LT(completed(), total) << "the drain was over before the kill; slow the archivers more";
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);

  ASSERT_TRUE(test::wait_until(
      [&] {
        const auto pid = live_scheduler_pid(h.db());
        return pid != 0 && pid != victim;
      },
      30s))
      << "no new scheduler";
  ASSERT_TRUE(test::wait_until([&] { return completed() == total; }, 120s)) << h.db().scalar(
      "SELECT string_agg(status || ' ' || count, ', ') FROM "
      "(SELECT status, count(*)::text FROM timewarp.items GROUP BY status) s");
  EXPECT_EQ(h.failures(), "");
  EXPECT_EQ(h.db().count(fmt::format(
                "SELECT scheduler_restarts FROM timewarp.monitors WHERE pid = {}", h.pid())),
            1);
  EXPECT_EQ(h.restore(h.path("d997/f997")), "997");
  EXPECT_EQ(h.stop(), 0);
  const auto log = test::read_file(h.log_file());
  EXPECT_NE(
      log.find(fmt::format("scheduler (pid {}) exited with status {}", victim, 128 + SIGKILL)),
      std::string::npos)
      << log;
  EXPECT_NE(log.find("restarting the scheduler"), std::string::npos) << log;
}

std::int64_t reported_archivers(const test::TestDatabase& db) {
  const auto n = db.scalar(
      "SELECT archivers FROM timewarp.schedulers WHERE stopped_at IS NULL ORDER BY id DESC LIMIT "
      "1");
  return n.empty() ? -1 : std::stoll(n);
}

TEST(MonitorSupervision, SighupPassesAChangedArchiversCountOn) {
  TW_REQUIRE_DATABASE();
  test::MonitorHarness h;
  const auto config = h.dir() / "timewarp.toml";
  test::write_file(config, "archivers = 1\n");
  h.start({"--config=" + config.string()});
  ASSERT_TRUE(h.wait_catchup());
  ASSERT_TRUE(test::wait_until([&] { return reported_archivers(h.db()) == 1; }, 30s));
  test::write_file(config, "archivers = 3\nbatch_size = 7\n");
  ASSERT_EQ(::kill(h.pid(), SIGHUP), 0);
  ASSERT_TRUE(test::wait_until([&] { return reported_archivers(h.db()) == 3; }, 30s))
      << reported_archivers(h.db());
  // A bad file is refused and changes nothing.
  test::write_file(config, "archivers = 0\n");
  ASSERT_EQ(::kill(h.pid(), SIGHUP), 0);
  test::write_file(h.path("after-bad-reload"), "x");  // the monitor still works
  ASSERT_TRUE(h.wait_done("UPDATE", h.path("after-bad-reload")));
  EXPECT_EQ(reported_archivers(h.db()), 3);
  EXPECT_EQ(h.stop(), 0);
  const auto log = test::read_file(h.log_file());
  EXPECT_NE(log.find("SIGHUP: archivers 1 -> 3"), std::string::npos) << log;
  EXPECT_NE(log.find("batch_size changed; this takes a restart"), std::string::npos) << log;
  EXPECT_NE(log.find("SIGHUP: the configuration is not valid"), std::string::npos) << log;
}

TEST(MonitorSupervision, TimewarpArchiversResizesTheRunningPool) {
  TW_REQUIRE_DATABASE();
  test::MonitorHarness h;
  h.start({"--archivers=2"});
  ASSERT_TRUE(h.wait_catchup());
  ASSERT_TRUE(test::wait_until([&] { return reported_archivers(h.db()) == 2; }, 30s));
  std::string out;
  ASSERT_EQ(test::run_command({test::cli_exe(), "--database=" + h.db().conninfo(),
                               "--heartbeat-interval=0.2", "archivers", "4"},
                              &out),
            0)
      << out;
  EXPECT_NE(out.find("4 archivers"), std::string::npos) << out;
  EXPECT_EQ(reported_archivers(h.db()), 4);
  EXPECT_EQ(
      h.db().count(fmt::format("SELECT archivers FROM timewarp.monitors WHERE pid = {}", h.pid())),
      4);
  // Shown without N.
  ASSERT_EQ(
      test::run_command({test::cli_exe(), "--database=" + h.db().conninfo(), "archivers"}, &out),
      0);
  EXPECT_NE(out.find(": 4 archivers"), std::string::npos) << out;
  // A scheduler started after a crash keeps the new size.
  const auto victim = live_scheduler_pid(h.db());
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  ASSERT_TRUE(test::wait_until(
      [&] {
        const auto pid = live_scheduler_pid(h.db());
        return pid != 0 && pid != victim && reported_archivers(h.db()) == 4;
      },
      30s));
  EXPECT_EQ(h.stop(), 0);
}

TEST(MonitorSupervision, ArchiversWithoutARunningMonitorSaysSo) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  std::string out;
  EXPECT_EQ(
      test::run_command(
          {test::cli_exe(), "--database=" + db.conninfo(), "archivers", "3", "--wait=0.3"}, &out),
      1);
  EXPECT_EQ(
      test::run_command({test::cli_exe(), "--database=" + db.conninfo(), "archivers", "0"}, &out),
      2);
}

}  // namespace
}  // namespace tw

namespace tw {
namespace {

TEST(MonitorStart, ASourceInsideTheBackupRootIsRefusedBeforeAnythingStarts) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  db.connect().exec("DROP SCHEMA timewarp CASCADE");
  std::string out;
  const int code = test::run_command(
      {"/bin/sh", "-c", "\"$0\" --backup-root \"$1\" --source \"$1/src\" --database \"$2\" 2>&1",
       test::monitor_exe(), dir.path().string(), db.conninfo()},
      &out);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("lies inside backup_root"), std::string::npos) << out;
  EXPECT_EQ(db.scalar("SELECT count(*) FROM pg_namespace WHERE nspname = 'timewarp'"), "0");
}

}  // namespace
}  // namespace tw
