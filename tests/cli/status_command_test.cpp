// `timewarp status` and `status --json` against a real database in known states: empty, a
// backlog, failures, two schedulers; and the archive's section on a real archive. The JSON
// is parsed, never grepped.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "archive/store.hpp"
#include "cli/cli_test_util.hpp"
#include "common/time.hpp"
#include "db/queue.hpp"

namespace tw {
namespace {

using nlohmann::json;
using test::cli_json;
using test::noise;
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

// An archive at `root` whose versions were archived ten and nine days ago: a's first
// version holds content b's only version holds too, c's first content is its own.
void archive_days_ago(const test::TempDir& dir, const std::string& root, std::size_t size) {
  constexpr std::int64_t kDay = 86400LL * 1'000'000'000;
  std::int64_t clock = now_ns() - 10 * kDay;
  archive::StoreHooks hooks;
  hooks.now = [&clock] { return clock; };
  auto store = archive::Store::open(root, archive::Store::Mode::ReadWrite, hooks);
  ASSERT_TRUE(store) << store.error();
  const auto put = [&](const std::string& name, std::uint64_t seed) {
    test::write_file(dir / name, noise(size, seed));
    const auto result = store->update((dir / name).string());
    ASSERT_EQ(result.outcome, Outcome::Complete) << result.message;
  };
  put("a", 1);
  put("c", 3);
  clock += kDay;
  put("a", 2);
  put("b", 1);
  put("c", 4);
}

// The archive's section, on a real archive: its size, the bytes its versions use, what the
// configured policy would remove now and what that frees (content a kept version names too
// is not freed), and the last collection once there is one.
TEST(StatusCommand, ArchiveSectionShowsWhatRetentionWouldReclaim) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const std::string root = (dir / "archive").string();
  constexpr std::size_t kSize = 50'000;
  archive_days_ago(dir, root, kSize);
  EXPECT_FALSE(cli_json(db, {"status", "--json"}).contains("archive")) << "no backup_root";
  // Today's midnight only: each path keeps its latest version.
  const std::vector<std::string> keys = {"--backup-root=" + root, "--keep-within=0",
                                         "--keep-hourly=0",       "--keep-daily=1",
                                         "--keep-weekly=0",       "--retention-timezone=UTC"};
  std::vector<std::string> args = keys;
  args.insert(args.end(), {"status", "--json"});
  json doc = cli_json(db, args);
  ASSERT_TRUE(doc.contains("archive")) << doc.dump(2);
  const json& a = doc.at("archive");
  EXPECT_EQ(a.at("root"), root);
  EXPECT_EQ(a.at("format"), 2);
  EXPECT_EQ(a.at("blobs"), 4);
  EXPECT_EQ(a.at("live_blobs"), 4);
  EXPECT_EQ(a.at("live_bytes"), 4 * kSize);
  EXPECT_EQ(a.at("collectable_bytes"), 0);
  EXPECT_GT(a.at("content_bytes").get<std::uint64_t>(), 4 * kSize);
  EXPECT_GT(a.at("catalog_bytes").get<std::uint64_t>(), 0u);
  EXPECT_EQ(a.at("bytes"), a.at("content_bytes").get<std::uint64_t>() +
                               a.at("catalog_bytes").get<std::uint64_t>());
  EXPECT_EQ(a.at("retention").at("versions"), 5);
  EXPECT_EQ(a.at("retention").at("versions_removed"), 2) << "a's first and c's first";
  EXPECT_EQ(a.at("retention").at("bytes_freed"), kSize) << "b still names a's first content";
  EXPECT_TRUE(a.at("last_collection").is_null());

  std::string out;
  args = keys;
  args.emplace_back("status");
  ASSERT_EQ(run_cli(db, args, &out), 0) << out;
  for (const std::string& line :
       {fmt::format("archive     {} (format 2): ", root),
        std::string("live        195.3 KiB in 4 blobs that versions name; a collection could "
                    "give back about 0 bytes now\n"),
        std::string("retention   the policy would remove 2 of 5 versions now, freeing about "
                    "48.8 KiB\n"),
        std::string("last gc     none yet\n")}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\nnot in:\n" << out;
  }

  // Forget applies the policy, then collects (two rounds): the section follows.
  args = keys;
  args.emplace_back("forget");
  ASSERT_EQ(run_cli(db, args, &out), 0) << out;
  args = keys;
  args.insert(args.end(), {"status", "--json"});
  doc = cli_json(db, args);
  const json& after = doc.at("archive");
  EXPECT_EQ(after.at("blobs"), 3);
  EXPECT_EQ(after.at("live_bytes"), 3 * kSize);
  EXPECT_EQ(after.at("retention").at("versions_removed"), 0);
  EXPECT_EQ(after.at("retention").at("bytes_freed"), 0);
  const json& last = after.at("last_collection");
  ASSERT_TRUE(last.is_object()) << after.dump(2);
  EXPECT_EQ(last.at("collection"), 2);
  EXPECT_EQ(last.at("bytes_removed"), kSize);
  EXPECT_LT(last.at("age_seconds").get<double>(), 600.0);
  args = keys;
  args.emplace_back("status");
  ASSERT_EQ(run_cli(db, args, &out), 0) << out;
  EXPECT_NE(out.find("last gc     #2 "), std::string::npos) << out;
  EXPECT_NE(out.find(" given back, 1 blob removed\n"), std::string::npos) << out;
}

// With a pack store configured, the archive's section says what the store does not hold
// yet, read from the archive alone: a store that does not answer changes nothing there,
// and `ship` against it fails with one line naming it, the keys never shown.
TEST(StatusCommand, ArchiveSectionShowsWhatIsNotShippedYet) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const std::string root = (dir / "archive").string();
  archive_days_ago(dir, root, 50'000);
  const std::string secret = "s3cr3t-key-never-shown";
  const std::vector<std::string> keys = {
      "--backup-root=" + root,          "--store-endpoint=http://127.0.0.1:9",
      "--store-bucket=archive",         "--store-prefix=host-a",
      "--store-access-key=AKIAEXAMPLE", "--store-secret-key=" + secret};
  std::vector<std::string> args = keys;
  args.insert(args.end(), {"status", "--json"});
  const json doc = cli_json(db, args);
  const json& shipping = doc.at("archive").at("shipping");
  ASSERT_TRUE(shipping.is_object()) << doc.dump(2);
  EXPECT_EQ(shipping.at("store"), "http://127.0.0.1:9/archive/host-a");
  EXPECT_EQ(shipping.at("packs_pending"), 1);
  EXPECT_GT(shipping.at("bytes_pending").get<std::uint64_t>(), 200'000u);
  EXPECT_GE(shipping.at("oldest_pending_age_seconds").get<double>(), 0.0);
  EXPECT_EQ(shipping.at("packs_shipped"), 0);
  EXPECT_TRUE(shipping.at("last_shipped_age_seconds").is_null());
  EXPECT_TRUE(shipping.at("catalog_shipped_age_seconds").is_null());
  EXPECT_TRUE(cli_json(db, {"--backup-root=" + root, "status", "--json"})
                  .at("archive")
                  .at("shipping")
                  .is_null())
      << "no store configured";
  std::string out;
  args = keys;
  args.emplace_back("status");
  ASSERT_EQ(run_cli(db, args, &out), 0) << out;
  EXPECT_NE(out.find("shipping    to http://127.0.0.1:9/archive/host-a: 1 pack ("),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" not shipped yet, the oldest begun "), std::string::npos) << out;
  // Its stderr with its stdout: `sh -c 'exec "$0" "$@" 2>&1' timewarp ARGS...`.
  args = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", test::cli_exe(),
          "--database=" + db.conninfo()};
  args.insert(args.end(), keys.begin(), keys.end());
  args.emplace_back("ship");
  EXPECT_EQ(test::run_command(args, &out), 1) << out;
  EXPECT_NE(out.find("timewarp ship: "), std::string::npos) << out;
  EXPECT_NE(out.find("127.0.0.1:9"), std::string::npos) << out;
  EXPECT_EQ(out.find(secret), std::string::npos) << out;
  args = keys;
  args.emplace_back("config");
  ASSERT_EQ(run_cli(db, args, &out), 0) << out;
  EXPECT_EQ(out.find(secret), std::string::npos) << out;
  EXPECT_NE(out.find("(set, not shown)"), std::string::npos) << out;
}

TEST(StatusCommand, AnArchiveThatCannotBeReadIsOneLineAndStatusGoesOn) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const std::string root = (dir / "none").string();
  const json doc = cli_json(db, {"--backup-root=" + root, "status", "--json"});
  EXPECT_EQ(doc.at("archive").at("root"), root);
  EXPECT_FALSE(doc.at("archive").at("error").get<std::string>().empty()) << doc.dump(2);
  EXPECT_EQ(doc.at("backlog").at("total"), 0) << "the queue's part is all there";
  std::string out;
  ASSERT_EQ(run_cli(db, {"--backup-root=" + root, "status"}, &out), 0) << out;
  // The section comes last: one line.
  const auto line = out.find(fmt::format("\narchive     {} cannot be read: ", root));
  ASSERT_NE(line, std::string::npos) << out;
  EXPECT_EQ(out.find('\n', line + 1), out.size() - 1) << out;
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
