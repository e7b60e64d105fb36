// The counters behind `timewarp status`, by host and status (migrations 0003 and 0009), stay
// equal to real counts through every kind of write the suite makes, from several
// connections at once, the migration to counters by host counts what was there, and the
// queue_status view keeps its columns.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "db/housekeeping.hpp"
#include "db/migrations.hpp"
#include "db/queue.hpp"
#include "db/status.hpp"

namespace tw {
namespace {

// "host:STATUS=n,..." of the counters, and of the table.
std::string counted(const test::TestDatabase& db) {
  return db.scalar(
      "SELECT coalesce(string_agg(host || ':' || status || '=' || n, ',' ORDER BY host, status), "
      "'') FROM (SELECT host, status, sum(n) AS n FROM timewarp.item_counts GROUP BY host, status "
      "HAVING sum(n) <> 0) c");
}

std::string real(const test::TestDatabase& db) {
  return db.scalar(
      "SELECT coalesce(string_agg(host || ':' || status || '=' || n, ',' ORDER BY host, status), "
      "'') FROM (SELECT host, status, count(*) AS n FROM timewarp.items GROUP BY host, status) c");
}

std::vector<db::NewItem> items(int n, const std::string& prefix) {
  std::vector<db::NewItem> out;
  for (int i = 0; i < n; ++i) {
    db::NewItem item;
    item.path = "/" + prefix + "/" + std::to_string(i);
    out.push_back(item);
  }
  return out;
}

TEST(StatusCounters, FollowEveryKindOfWrite) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  auto conn = db.connect();
  db::Queue queue_b(conn, "b");
  queue_b.enqueue(items(30, "b"));
  EXPECT_EQ(counted(db), "b:NEW=30");
  db::Queue queue(conn);  // every host's items, queued without one
  queue.enqueue(items(100, "a"));
  EXPECT_EQ(counted(db), ":NEW=100,b:NEW=30");
  const auto scheduler_b = queue_b.register_scheduler("h", 2, "fifo", 40, 1);
  auto claimed_b = queue_b.claim({scheduler_b, 10, db::Strategy::Fifo, 60});
  ASSERT_EQ(claimed_b.size(), 10u);
  const std::vector<db::Completion> done_b{{claimed_b[0].id, 1, 1, 0, 0, ""}};
  queue_b.complete(scheduler_b, done_b);
  EXPECT_EQ(counted(db), ":NEW=100,b:COMPLETED=1,b:DISPATCHED=9,b:NEW=20");
  const auto scheduler = queue.register_scheduler("h", 1, "fifo", 40, 1);
  auto claimed = queue.claim({scheduler, 40, db::Strategy::Fifo, 60});
  ASSERT_EQ(claimed.size(), 40u);
  EXPECT_EQ(counted(db), real(db));
  std::vector<db::Completion> done;
  for (int i = 0; i < 20; ++i)
    done.push_back({claimed[static_cast<std::size_t>(i)].id, 1, 1, 0, 0, ""});
  queue.complete(scheduler, done);
  std::vector<db::Failure> failures;
  for (int i = 20; i < 30; ++i)
    failures.push_back({claimed[static_cast<std::size_t>(i)].id, i % 2 == 0, "e", 0, 0});
  queue.fail(scheduler, failures, {});
  std::vector<std::int64_t> back;
  for (int i = 30; i < 35; ++i) back.push_back(claimed[static_cast<std::size_t>(i)].id);
  queue.release(scheduler, back);
  EXPECT_EQ(counted(db), real(db));
  test::sql(db,
            "UPDATE timewarp.items SET lease_until = now() - interval '1 second' WHERE status = "
            "'DISPATCHED'");
  queue.recover_expired_leases(1);
  EXPECT_EQ(counted(db), real(db));
  const std::vector<std::int64_t> failed_ids{claimed[20].id, claimed[22].id};
  db::retry_failed(conn, failed_ids);
  db::retry_all_failed(conn);
  EXPECT_EQ(counted(db), real(db));
  db::prune_completed(conn, 0, 3);
  EXPECT_EQ(counted(db), real(db));
  test::sql(db, "DELETE FROM timewarp.items WHERE id % 7 = 0");
  test::sql(db,
            "COPY timewarp.items (op, path, status) FROM PROGRAM 'printf "
            "\"UPDATE\\t/copied\\tFAILED\\n\"'");
  EXPECT_EQ(counted(db), real(db));
  // A transaction rolled back leaves the counters as they were.
  EXPECT_THROW(conn.transaction([&] {
    conn.exec("UPDATE timewarp.items SET status = 'COMPLETED'");
    throw std::runtime_error("changed my mind");
  }),
               std::runtime_error);
  EXPECT_EQ(counted(db), real(db));
  test::sql(db, "TRUNCATE timewarp.items");
  EXPECT_EQ(counted(db), "");
  queue.enqueue(items(3, "b"));
  queue_b.enqueue(items(2, "c"));
  EXPECT_EQ(counted(db), ":NEW=3,b:NEW=2");

  // The repair function agrees.
  test::sql(db, "UPDATE timewarp.item_counts SET n = n + 1000");
  test::sql(db, "SELECT timewarp.recount_items()");
  EXPECT_EQ(counted(db), ":NEW=3,b:NEW=2");
}

// A database that had items of several hosts before the counters were kept by host: after
// the migration each host's counts are its own.
TEST(StatusCounters, TheMigrationToCountersByHostCountsWhatWasThere) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  auto conn = db.connect();
  conn.exec("DROP SCHEMA timewarp CASCADE");
  const auto& all = db::all_migrations();
  ASSERT_EQ(all.back().version, 9);
  conn.exec("CREATE SCHEMA timewarp");
  conn.exec(
      "CREATE TABLE timewarp.schema_migrations (version integer PRIMARY KEY, name text NOT "
      "NULL, applied_at timestamptz NOT NULL DEFAULT now())");
  for (const auto& m : all) {
    if (m.version == 9) break;
    conn.exec(m.sql);
    conn.query("INSERT INTO timewarp.schema_migrations (version, name) VALUES ($1, $2)", m.version,
               m.name);
  }
  db::Queue(conn, "a").enqueue(items(4, "a"));
  db::Queue(conn, "b").enqueue(items(2, "b"));
  db::Queue(conn).enqueue(items(1, "none"));
  test::sql(db, "UPDATE timewarp.items SET status = 'FAILED' WHERE path = '/a/0'");
  EXPECT_EQ(db::migrate(conn).size(), 1u);
  EXPECT_EQ(counted(db), ":NEW=1,a:FAILED=1,a:NEW=3,b:NEW=2");
  EXPECT_EQ(counted(db), real(db));
  const auto hosts = db::read_hosts(conn);
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[1].host, "a");
  EXPECT_EQ(hosts[1].waiting, 3);
  EXPECT_EQ(hosts[1].failed, 1);
  EXPECT_FALSE(hosts[1].monitor);
  // Once nothing of it waits or failed, the host '' is no longer listed.
  test::sql(db, "UPDATE timewarp.items SET status = 'COMPLETED' WHERE host = ''");
  const auto later = db::read_hosts(conn);
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[0].host, "a");
}

TEST(StatusCounters, ExactUnderConcurrentWritersWithoutDeadlocks) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      try {
        auto conn = db.connect();
        // Two hosts of their own, and two that take every host's items.
        db::Queue queue(conn, w % 2 == 0 ? std::string() : "host" + std::to_string(w));
        const auto scheduler = queue.register_scheduler("h", w, "fifo", 25, 1);
        for (int round = 0; round < 20; ++round) {
          queue.enqueue(items(30, "w" + std::to_string(w) + "-" + std::to_string(round)));
          const auto claimed = queue.claim({scheduler, 25, db::Strategy::Fifo, 60});
          std::vector<db::Completion> done;
          std::vector<db::Failure> failed;
          for (std::size_t i = 0; i < claimed.size(); ++i) {
            if (i % 5 == 0) {
              failed.push_back({claimed[i].id, i % 10 == 0, "e", 0, 0});
            } else {
              done.push_back({claimed[i].id, 1, 1, 0, 0, ""});
            }
          }
          queue.complete(scheduler, done);
          queue.fail(scheduler, failed, {});
          if (round % 5 == 4) db::prune_completed(conn, 0, 10, 2);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker " << w << ": " << e.what();
        ++errors;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(counted(db), real(db));
}

TEST(StatusCounters, QueueStatusViewKeepsItsColumns) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  EXPECT_EQ(
      db.scalar(
          "SELECT string_agg(attname || ':' || format_type(atttypid, atttypmod), ',' ORDER BY "
          "attnum) "
          "FROM pg_attribute WHERE attrelid = 'timewarp.queue_status'::regclass AND attnum > 0"),
      "claimable:bigint,delayed:bigint,dispatched:bigint,completed:bigint,failed:bigint,"
      "oldest_claimable_age:interval,next_retry_at:timestamp with time zone,"
      "completed_last_minute:bigint,failed_last_hour:bigint");
  // db::Queue::counts() reads the view and sees the counters.
  auto conn = db.connect();
  db::Queue queue(conn);
  queue.enqueue(items(7, "v"));
  test::sql(db, "UPDATE timewarp.items SET not_before = now() + interval '1 minute' WHERE id <= 2");
  const auto counts = queue.counts();
  EXPECT_EQ(counts.claimable, 5);
  EXPECT_EQ(counts.delayed, 2);
  ASSERT_TRUE(counts.next_retry_in.has_value());
  EXPECT_NEAR(*counts.next_retry_in, 60.0, 5.0);
}

}  // namespace
}  // namespace tw
