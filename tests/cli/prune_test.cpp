// Housekeeping: `timewarp prune` and db::prune_completed / db::prune_audit remove only
// COMPLETED items older than the age, in batches, and keep the status counters exact.
#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "db/housekeeping.hpp"

namespace tw {
namespace {

using nlohmann::json;
using test::cli_json;
using test::run_cli;
using test::sql;

void fill_mixed(const test::TestDatabase& db) {
  test::insert_items(db, 30, "old", "COMPLETED", ", finished_at", ", now() - interval '8 days'");
  test::insert_items(db, 5, "recent", "COMPLETED", ", finished_at", ", now() - interval '1 day'");
  test::insert_items(db, 3, "failed", "FAILED", ", finished_at, last_error",
                     ", now() - interval '30 days', 'x'");
  test::insert_items(db, 4, "waiting", "NEW", ", enqueued_at", ", now() - interval '30 days'");
}

TEST(Prune, RemovesOnlyCompletedItemsOlderThanPruneAge) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  fill_mixed(db);
  std::string out;
  // The default age is prune_age (7 days).
  ASSERT_EQ(run_cli(db, {"prune", "--batch-rows", "7"}, &out), 0) << out;
  EXPECT_EQ(out.rfind("removed 30 completed items finished more than 7d00h ago", 0), 0u) << out;
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'"), 5);
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items WHERE status = 'FAILED'"), 3);
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items WHERE status = 'NEW'"), 4);
  const json doc = cli_json(db, {"status", "--json"});
  EXPECT_EQ(doc.at("totals").at("completed"), 5);
  EXPECT_EQ(doc.at("totals").at("failed"), 3);
  EXPECT_EQ(doc.at("backlog").at("claimable"), 4);

  // The config key (flag, environment or file) sets the default age.
  ASSERT_EQ(run_cli(db, {"--prune-age=3600", "prune"}, &out), 0) << out;
  EXPECT_EQ(out.rfind("removed 5 completed items finished more than 1h00m ago", 0), 0u) << out;
  ASSERT_EQ(run_cli(db, {"prune", "--older-than", "0"}, &out), 0) << out;
  EXPECT_EQ(out.rfind("removed 0 completed items", 0), 0u) << out;
  EXPECT_EQ(cli_json(db, {"status", "--json"}).at("totals").at("completed"), 0);
}

TEST(Prune, SmallBatchesAndABoundOnThem) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  fill_mixed(db);
  auto conn = db.connect();
  // Two batches of 7 at most: 14 of the 30 old ones, oldest first.
  EXPECT_EQ(db::prune_completed(conn, 7 * 86400.0, 7, 2), 14);
  EXPECT_EQ(db::prune_completed(conn, 7 * 86400.0, 7), 16);
  EXPECT_EQ(db::prune_completed(conn, 7 * 86400.0, 7), 0);
  EXPECT_EQ(db::prune_completed(conn, 3600, 1000), 5);
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items"), 7);
  EXPECT_EQ(db.scalar("SELECT string_agg(status || '=' || n, ',' ORDER BY status) FROM "
                      "(SELECT status, sum(n) AS n FROM timewarp.item_counts GROUP BY status) c"),
            "COMPLETED=0,FAILED=3,NEW=4");
}

TEST(Prune, OldBatchAndStoppedSchedulerRecordsGoToo) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  sql(db,
      R"(INSERT INTO timewarp.schedulers (host, pid, strategy, batch_size, started_at, heartbeat_at, stopped_at)
             VALUES ('gone', 1, 'fifo', 10, now() - interval '9 days', now() - interval '8 days', now() - interval '8 days'),
                    ('crashed', 2, 'fifo', 10, now() - interval '9 days', now() - interval '8 days', NULL),
                    ('alive', 3, 'fifo', 10, now() - interval '9 days', now(), NULL),
                    ('recently-stopped', 4, 'fifo', 10, now() - interval '2 days', now() - interval '1 day', now() - interval '1 day'))");
  // Batches: 1 (old, drained) of scheduler 1; 2 (old) of 2 still holding a DISPATCHED item;
  // 3 (old) of the live scheduler; 4 (recent) of the live scheduler.
  sql(db,
      R"(INSERT INTO timewarp.batches (id, scheduler_id, strategy, requested, size, claimed_at, drained_at)
             VALUES (1, 1, 'fifo', 10, 10, now() - interval '8 days', now() - interval '8 days'),
                    (2, 2, 'fifo', 10, 10, now() - interval '8 days', NULL),
                    (3, 3, 'fifo', 10, 10, now() - interval '8 days', now() - interval '8 days'),
                    (4, 3, 'fifo', 10, 10, now(), NULL))");
  sql(db,
      "INSERT INTO timewarp.items (op, path, status, scheduler_id, batch_id) VALUES ('UPDATE', "
      "'/x', 'DISPATCHED', 2, 2)");
  auto conn = db.connect();
  const auto result = db::prune_audit(conn, 7 * 86400.0, 1);
  EXPECT_EQ(result.batches, 2);     // 1 and 3
  EXPECT_EQ(result.schedulers, 1);  // 'gone'; 'crashed' still has batch 2
  EXPECT_EQ(db.scalar("SELECT string_agg(id::text, ',' ORDER BY id) FROM timewarp.batches"), "2,4");
  EXPECT_EQ(db.scalar("SELECT string_agg(host, ',' ORDER BY id) FROM timewarp.schedulers"),
            "crashed,alive,recently-stopped");
}

}  // namespace
}  // namespace tw
