// `timewarp status` and `status --json` against a real database in known states: empty, a
// backlog, failures, two schedulers. The JSON is parsed, never grepped.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "db/queue.hpp"

namespace tw {
namespace {

using nlohmann::json;
using test::cli_json;
using test::run_cli;
using test::sql;

TEST(StatusCommand, EmptyDatabase) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  const json doc = cli_json(db, {"status", "--json"});
  EXPECT_FALSE(doc.at("time").get<std::string>().empty());
  EXPECT_NE(doc.at("database").get<std::string>().find("dbname="), std::string::npos);
  const auto& backlog = doc.at("backlog");
  EXPECT_EQ(backlog.at("claimable"), 0);
  EXPECT_EQ(backlog.at("delayed"), 0);
  EXPECT_EQ(backlog.at("dispatched"), 0);
  EXPECT_EQ(backlog.at("total"), 0);
  EXPECT_TRUE(backlog.at("oldest_claimable_age_seconds").is_null());
  EXPECT_TRUE(backlog.at("next_retry_in_seconds").is_null());
  EXPECT_EQ(doc.at("progress").at("completed_last_minute"), 0);
  EXPECT_EQ(doc.at("progress").at("per_second"), 0.0);
  EXPECT_EQ(doc.at("progress").at("drain_eta_seconds"), 0.0);
  EXPECT_EQ(doc.at("totals").at("completed"), 0);
  EXPECT_EQ(doc.at("totals").at("failed"), 0);
  EXPECT_TRUE(doc.at("schedulers").is_array());
  EXPECT_TRUE(doc.at("schedulers").empty());
  EXPECT_EQ(doc.at("failures").at("last_hour"), 0);
  EXPECT_TRUE(doc.at("failures").at("recent").empty());
  EXPECT_FALSE(doc.contains("watch"));

  std::string out;
  ASSERT_EQ(run_cli(db, {"status"}, &out), 0) << out;
  EXPECT_NE(out.find("backlog     0 items: 0 claimable, 0 delayed, 0 dispatched\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("oldest      - (nothing claimable)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("0 completed in the last minute (0/s); queue drained\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("schedulers  none running\n"), std::string::npos) << out;
  EXPECT_NE(out.find("failures    none in the last hour\n"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no escape codes when not on a terminal";
}

TEST(StatusCommand, BacklogProgressAndEstimate) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  // 50 NEW; of these 10 dispatched, 5 delayed by an hour; the oldest claimable one queued
  // 90 s ago. 30 completed 30 s ago, 20 completed two hours ago.
  test::insert_items(db, 50, "backlog");
  sql(db, R"(UPDATE timewarp.items SET status = 'DISPATCHED', scheduler_id = 1,
                    lease_until = now() + interval '1 minute' WHERE id BETWEEN 1 AND 10)");
  sql(db,
      "UPDATE timewarp.items SET not_before = now() + interval '1 hour' WHERE id BETWEEN 11 AND "
      "15");
  sql(db, "UPDATE timewarp.items SET enqueued_at = now() - interval '90 seconds' WHERE id = 16");
  test::insert_items(db, 30, "recent", "COMPLETED", ", finished_at",
                     ", now() - interval '30 seconds'");
  test::insert_items(db, 20, "old", "COMPLETED", ", finished_at", ", now() - interval '2 hours'");

  const json doc = cli_json(db, {"status", "--json"});
  const auto& backlog = doc.at("backlog");
  EXPECT_EQ(backlog.at("claimable"), 35);
  EXPECT_EQ(backlog.at("delayed"), 5);
  EXPECT_EQ(backlog.at("dispatched"), 10);
  EXPECT_EQ(backlog.at("total"), 50);
  EXPECT_NEAR(backlog.at("oldest_claimable_age_seconds").get<double>(), 90.0, 5.0);
  EXPECT_NEAR(backlog.at("next_retry_in_seconds").get<double>(), 3600.0, 10.0);
  const auto& progress = doc.at("progress");
  EXPECT_EQ(progress.at("completed_last_minute"), 30);
  EXPECT_DOUBLE_EQ(progress.at("per_second").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(progress.at("drain_eta_seconds").get<double>(), 100.0);  // 50 left at 0.5/s
  EXPECT_EQ(doc.at("totals").at("completed"), 50);
  EXPECT_EQ(doc.at("totals").at("failed"), 0);

  std::string out;
  ASSERT_EQ(run_cli(db, {"status"}, &out), 0) << out;
  EXPECT_NE(out.find("backlog     50 items: 35 claimable, 5 delayed (next retry in 59m"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("10 dispatched\n"), std::string::npos) << out;
  EXPECT_NE(out.find("oldest      1m3"), std::string::npos) << out;
  EXPECT_NE(out.find("30 completed in the last minute (0.50/s); backlog drains in about 1m40s\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("totals      50 completed, 0 failed\n"), std::string::npos) << out;
  // A backlog and nobody to work on it: say so.
  EXPECT_NE(out.find("none running (is timewarp-monitor started?)"), std::string::npos) << out;
}

TEST(StatusCommand, NoCompletionsMeansNoEstimate) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::insert_items(db, 3, "waiting");
  const json doc = cli_json(db, {"status", "--json"});
  EXPECT_EQ(doc.at("backlog").at("claimable"), 3);
  EXPECT_TRUE(doc.at("progress").at("drain_eta_seconds").is_null());
  std::string out;
  ASSERT_EQ(run_cli(db, {"status"}, &out), 0);
  EXPECT_NE(out.find("nothing completed in the last minute: no estimate"), std::string::npos)
      << out;
}

TEST(StatusCommand, FailuresOfTheLastHourWithTheirErrors) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  sql(db, R"(INSERT INTO timewarp.items (op, path, status, attempts, last_error, finished_at) VALUES
               ('UPDATE', '/data/a', 'FAILED', 5, 'disk on fire', now() - interval '50 minutes'),
               ('UPDATE', '/data/b', 'FAILED', 1, 'permission denied: /data/b', now() - interval '10 minutes'),
               ('STAT',   '/data/c', 'FAILED', 2, E'two\nlines', now() - interval '1 minute'),
               ('UPDATE', '/data/old', 'FAILED', 5, 'long ago', now() - interval '2 hours'))");
  const json doc = cli_json(db, {"status", "--json"});
  EXPECT_EQ(doc.at("totals").at("failed"), 4);
  const auto& failures = doc.at("failures");
  EXPECT_EQ(failures.at("last_hour"), 3);
  const auto& recent = failures.at("recent");
  ASSERT_EQ(recent.size(), 3u);
  // Newest first, with their errors.
  EXPECT_EQ(recent[0].at("path"), "/data/c");
  EXPECT_EQ(recent[0].at("error"), "two\nlines");
  EXPECT_EQ(recent[0].at("op"), "STAT");
  EXPECT_EQ(recent[0].at("attempts"), 2);
  EXPECT_EQ(recent[1].at("path"), "/data/b");
  EXPECT_EQ(recent[1].at("error"), "permission denied: /data/b");
  EXPECT_EQ(recent[2].at("path"), "/data/a");
  EXPECT_EQ(recent[2].at("error"), "disk on fire");
  EXPECT_EQ(recent[2].at("status"), "FAILED");
  EXPECT_TRUE(recent[2].at("id").is_number_integer());

  std::string out;
  ASSERT_EQ(run_cli(db, {"status"}, &out), 0) << out;
  EXPECT_NE(out.find("failures    3 in the last hour\n"), std::string::npos) << out;
  EXPECT_NE(out.find("UPDATE /data/b (1 attempt)"), std::string::npos) << out;
  EXPECT_NE(out.find("      permission denied: /data/b\n"), std::string::npos) << out;
  EXPECT_NE(out.find("      two%0Alines\n"), std::string::npos) << "control bytes escaped:\n"
                                                                << out;
  EXPECT_EQ(out.find("long ago"), std::string::npos) << out;

  // A shorter list says how many more there are.
  const json short_doc = cli_json(db, {"status", "--json", "--failures", "1"});
  EXPECT_EQ(short_doc.at("failures").at("recent").size(), 1u);
  EXPECT_EQ(short_doc.at("failures").at("last_hour"), 3);
  ASSERT_EQ(run_cli(db, {"status", "--failures", "1"}, &out), 0);
  EXPECT_NE(out.find("... and 2 more: timewarp failed\n"), std::string::npos) << out;
}

TEST(StatusCommand, TwoSchedulersWithTheirHostsAndArchivers) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  auto conn = db.connect();
  db::Queue queue(conn);
  const auto a = queue.register_scheduler("host-a", 1111, "fifo", 100, 4);
  const auto b = queue.register_scheduler("host-b", 2222, "fair", 500, 2);
  const auto stopped = queue.register_scheduler("host-gone", 3333, "fifo", 100, 2);
  const auto stale = queue.register_scheduler("host-dead", 4444, "lifo", 100, 8);
  db::SchedulerStats sa;
  sa.archivers = 4;
  sa.busy = 3;
  sa.idle = 1;
  sa.busy_high_water = 4;
  sa.batch_queue_length = 80;
  sa.batch_queue_high_water = 100;
  sa.items_done = 12345;
  sa.items_failed = 2;
  queue.heartbeat(a, sa, 60, {});
  db::SchedulerStats sb;
  sb.archivers = 2;
  sb.busy = 0;
  sb.idle = 2;
  sb.busy_high_water = 2;
  sb.batch_queue_length = 0;
  sb.batch_queue_high_water = 500;
  sb.items_done = 77;
  queue.heartbeat(b, sb, 60, {});
  queue.unregister_scheduler(stopped, {});
  sql(db,
      "UPDATE timewarp.schedulers SET heartbeat_at = now() - interval '10 minutes' WHERE id = " +
          std::to_string(stale));

  const json doc = cli_json(db, {"status", "--json"});
  const auto& schedulers = doc.at("schedulers");
  ASSERT_EQ(schedulers.size(), 3u) << schedulers.dump(2);  // the stopped one is not shown
  const auto& ja = schedulers[0];
  EXPECT_EQ(ja.at("id"), a);
  EXPECT_EQ(ja.at("host"), "host-a");
  EXPECT_EQ(ja.at("pid"), 1111);
  EXPECT_EQ(ja.at("strategy"), "fifo");
  EXPECT_EQ(ja.at("archivers"), 4);
  EXPECT_EQ(ja.at("busy"), 3);
  EXPECT_EQ(ja.at("idle"), 1);
  EXPECT_EQ(ja.at("busy_high_water"), 4);
  EXPECT_EQ(ja.at("batch_queue_length"), 80);
  EXPECT_EQ(ja.at("batch_queue_high_water"), 100);
  EXPECT_EQ(ja.at("items_done"), 12345);
  EXPECT_EQ(ja.at("items_failed"), 2);
  EXPECT_EQ(ja.at("alive"), true);
  EXPECT_LT(ja.at("heartbeat_age_seconds").get<double>(), 30.0);
  const auto& jb = schedulers[1];
  EXPECT_EQ(jb.at("host"), "host-b");
  EXPECT_EQ(jb.at("strategy"), "fair");
  EXPECT_EQ(jb.at("batch_size"), 500);
  EXPECT_EQ(jb.at("idle"), 2);
  EXPECT_EQ(jb.at("batch_queue_high_water"), 500);
  EXPECT_EQ(jb.at("alive"), true);
  const auto& jd = schedulers[2];
  EXPECT_EQ(jd.at("host"), "host-dead");
  EXPECT_EQ(jd.at("alive"), false);
  EXPECT_NEAR(jd.at("heartbeat_age_seconds").get<double>(), 600.0, 30.0);

  std::string out;
  ASSERT_EQ(run_cli(db, {"status"}, &out), 0) << out;
  EXPECT_NE(out.find("schedulers  2 running, 1 stale\n"), std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("  #{} host-a  pid 1111  fifo  batch 100  heartbeat ", a)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("      archivers 4: 3 busy, 1 idle, busiest 4   batch queue 80, most 100   "
                     "done 12345, failed 2\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(fmt::format("  #{} host-b  pid 2222  fair  batch 500", b)), std::string::npos)
      << out;
  EXPECT_NE(out.find("      archivers 2: 0 busy, 2 idle, busiest 2   batch queue 0, most 500   "
                     "done 77, failed 0\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("host-dead"), std::string::npos) << out;
  EXPECT_NE(out.find(", stale\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("host-gone"), std::string::npos) << out;
}

TEST(StatusCommand, ColourOnlyWhenAskedOrOnATerminal) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  sql(db,
      "INSERT INTO timewarp.items (op, path, status, last_error, finished_at) "
      "VALUES ('UPDATE', '/x', 'FAILED', 'boom', now())");
  std::string out;
  ASSERT_EQ(run_cli(db, {"status"}, &out), 0);
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  ASSERT_EQ(run_cli(db, {"status", "--color=always"}, &out), 0);
  EXPECT_NE(out.find("\x1b[31m1 in the last hour\x1b[0m"), std::string::npos) << out;
}

TEST(StatusCommand, DatabaseWithoutTheSchemaSaysWhatToDo) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  sql(db, "DROP SCHEMA timewarp CASCADE");
  std::string out;
  EXPECT_EQ(run_cli(db, {"status"}, &out), 1);
  EXPECT_EQ(run_cli(db, {"status", "--watch", "--count", "1"}, &out), 0);
  EXPECT_NE(out.find("database error: the database has no TimeWarp schema (or an old one): run "
                     "`timewarp migrate`"),
            std::string::npos)
      << out;
}

TEST(StatusCommand, UnreachableDatabaseIsOneClearLineAndExitOne) {
  std::string out;
  const int code = test::run_command(
      {test::cli_exe(), "--database=host=127.0.0.1 port=1 dbname=nothing connect_timeout=2",
       "status"},
      &out);
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(out.empty()) << out;
}

}  // namespace
}  // namespace tw
