// The per-status counters behind `timewarp status` (migration 0003) stay equal to real
// counts through every kind of write the suite makes, from several connections at once,
// and the queue_status view keeps its columns.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "db/housekeeping.hpp"
#include "db/queue.hpp"
#include "db/status.hpp"

namespace tw {
namespace {

std::string counted(const test::TestDatabase& db) {
  return db.scalar(
      "SELECT coalesce(string_agg(status || '=' || n, ',' ORDER BY status), '') FROM "
      "(SELECT status, sum(n) AS n FROM timewarp.item_counts GROUP BY status HAVING sum(n) <> 0) "
      "c");
}

std::string real(const test::TestDatabase& db) {
  return db.scalar(
      "SELECT coalesce(string_agg(status || '=' || n, ',' ORDER BY status), '') FROM "
      "(SELECT status, count(*) AS n FROM timewarp.items GROUP BY status) c");
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
  db::Queue queue(conn);
  queue.enqueue(items(100, "a"));
  EXPECT_EQ(counted(db), "NEW=100");
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
  EXPECT_EQ(counted(db), "NEW=3");

  // The repair function agrees.
  test::sql(db, "UPDATE timewarp.item_counts SET n = n + 1000");
  test::sql(db, "SELECT timewarp.recount_items()");
  EXPECT_EQ(counted(db), "NEW=3");
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
        db::Queue queue(conn);
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
