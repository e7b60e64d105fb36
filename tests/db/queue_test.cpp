#include "db/queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "common/escape.hpp"
#include "db/status.hpp"
#include "support/test_support.hpp"

namespace tw::db {
namespace {

std::vector<NewItem> items(int n, const std::string& prefix = "/src/f") {
  std::vector<NewItem> out;
  for (int i = 0; i < n; ++i) out.push_back({Op::Update, prefix + std::to_string(i), "", "/src", 0, 4096, 1.7e9});
  return out;
}

class QueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_REQUIRE_DATABASE();
    db_ = std::make_unique<test::TestDatabase>();
    conn_ = std::make_unique<Connection>(db_->conninfo());
    queue_ = std::make_unique<Queue>(*conn_);
    sid_ = queue_->register_scheduler("test-host", 1, "fifo", 10, 1);
  }

  struct ClaimScans {
    std::size_t claimed = 0;
    std::int64_t seq_scans = -1;  // -1: the statistics had no row for the table
  };
  // A claim of 1,000 (coalescing on), in a transaction of its own, and how many times it
  // read the whole items table.
  ClaimScans claim_counting_scans(Strategy strategy) {
    conn_->exec("BEGIN");
    const auto claimed = queue_->claim({sid_, 1000, strategy, 60, true});
    const auto scans = conn_->exec(
        "SELECT seq_scan FROM pg_stat_xact_user_tables "
        "WHERE schemaname = 'timewarp' AND relname = 'items'");
    conn_->exec("COMMIT");
    EXPECT_EQ(scans.rows(), 1);
    return {claimed.size(), scans.rows() == 1 ? scans.int64(0, 0) : -1};
  }

  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<Connection> conn_;
  std::unique_ptr<Queue> queue_;
  std::int64_t sid_ = 0;
};

TEST_F(QueueTest, EnqueueKeepsOrderAndAnyEscapedPath) {
  std::vector<NewItem> batch = items(3);
  const std::string raw("/src/we\tird\n%\xFF name", 18);
  batch.push_back({Op::Move, escape_bytes(raw), escape_bytes(raw + "-moved"), "/src", 0, {}, {}});
  const auto ids = queue_->enqueue(batch);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  const auto claimed = queue_->claim({sid_, 10, Strategy::Fifo, 60});
  ASSERT_EQ(claimed.size(), 4u);
  EXPECT_EQ(claimed[3].op, Op::Move);
  EXPECT_EQ(unescape_bytes(claimed[3].path), raw);
  EXPECT_EQ(unescape_bytes(claimed[3].dest_path), raw + "-moved");
  EXPECT_EQ(db_->count("SELECT count(*) FROM timewarp.batches WHERE size = 4"), 1);
}

// Hosts sharing a database keep apart by their host_id: each claims, counts and looks up
// its own changes and those queued before changes had a host, never another host's, not
// even a change to the same path when its own are coalesced; in every strategy.
TEST_F(QueueTest, EachHostTakesItsOwnChangesAndThoseQueuedWithoutAHost) {
  Queue a(*conn_, "host-a");
  Queue b(*conn_, "host-b");
  a.enqueue(items(2, "/src/a"));
  b.enqueue(items(1, "/src/b"));
  queue_->enqueue(items(1, "/src/old"));  // queued with no host
  a.enqueue(items(1, "/same"));
  b.enqueue(items(1, "/same"));
  EXPECT_EQ(db_->count("SELECT count(*) FROM timewarp.items WHERE host = 'host-a'"), 3);
  EXPECT_TRUE(b.has_claimable());
  EXPECT_EQ(b.count_claimable(100), 3) << "its own two and the one with no host";
  EXPECT_EQ(b.waiting_beneath(std::vector<std::string>{"/"}).size(), 3u);
  for (const auto strategy :
       {Strategy::Fifo, Strategy::Lifo, Strategy::Priority, Strategy::Fair}) {
    SCOPED_TRACE(to_string(strategy));
    conn_->exec("BEGIN");
    const auto got_a = a.claim({sid_, 100, strategy, 60, true});
    const auto got_b = b.claim({sid_, 100, strategy, 60, true});
    conn_->exec("ROLLBACK");
    std::set<std::string> paths_a, paths_b;
    for (const auto& item : got_a) paths_a.insert(item.path);
    for (const auto& item : got_b) paths_b.insert(item.path);
    EXPECT_EQ(paths_a, (std::set<std::string>{"/src/a0", "/src/a1", "/src/old0", "/same0"}));
    EXPECT_EQ(paths_b, (std::set<std::string>{"/src/b0", "/same0"}))
        << "the change with no host went to the first claimer";
    EXPECT_EQ(got_a.size() + got_b.size(), 6u) << "one change each to /same0, not coalesced";
  }
}

TEST_F(QueueTest, ClaimUsesThePartialIndex) {
  queue_->enqueue(items(2000));
  conn_->exec("ANALYZE timewarp.items");
  conn_->exec("SET enable_seqscan = off");
  auto plan = conn_->exec(
      "EXPLAIN SELECT id FROM timewarp.items WHERE status = 'NEW' AND not_before <= now() "
      "ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED");
  std::string text;
  for (int r = 0; r < plan.rows(); ++r) text += std::string(plan.text(r, 0)) + "\n";
  EXPECT_NE(text.find("items_claim_fifo"), std::string::npos) << text;
}

// Coalescing looks up the batch's paths one by one through the path index, and `fair`
// visits each source root through its index, whatever the table's size and statistics: a
// claim never reads the whole table (a plan that did took hundreds of milliseconds per
// claim at 50,000 rows).
TEST_F(QueueTest, ClaimWithCoalesceNeverScansTheWholeTable) {
  conn_->exec(
      "INSERT INTO timewarp.items (op, path, source_root) "
      "SELECT 'UPDATE', '/big/file' || g, '/big' FROM generate_series(1, 50000) g");
  conn_->exec("ANALYZE timewarp.items");
  for (const auto strategy :
       {Strategy::Fifo, Strategy::Lifo, Strategy::Priority, Strategy::Fair}) {
    const auto claim = claim_counting_scans(strategy);
    EXPECT_EQ(claim.claimed, 1000u);
    EXPECT_EQ(claim.seq_scans, 0) << "strategy " << to_string(strategy);
  }
}

// The history of one path among many (`timewarp status --path`) is found through the path
// index and the MOVE destinations' index, whatever the table's size: the changes queued for
// the path, and the rename that brought something to it, and nothing else.
TEST_F(QueueTest, PathHistoryNeverScansTheWholeTable) {
  conn_->exec(
      "INSERT INTO timewarp.items (op, path, source_root, status) "
      "SELECT 'UPDATE', '/big/file' || (g % 25000), '/big', "
      "       CASE WHEN g % 3 = 0 THEN 'COMPLETED' ELSE 'NEW' END "
      "FROM generate_series(1, 50000) g");
  conn_->exec(
      "INSERT INTO timewarp.items (op, path, dest_path, source_root) "
      "VALUES ('MOVE', '/big/elsewhere', '/big/file7', '/big')");
  conn_->exec("ANALYZE timewarp.items");
  conn_->exec("BEGIN");
  const auto history = item_history(*conn_, "/big/file7", 0);
  const auto scans = conn_->exec(
      "SELECT seq_scan FROM pg_stat_xact_user_tables "
      "WHERE schemaname = 'timewarp' AND relname = 'items'");
  conn_->exec("COMMIT");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0].path, "/big/file7");
  EXPECT_EQ(history[1].path, "/big/file7");
  EXPECT_EQ(history[2].op, "MOVE");
  EXPECT_EQ(history[2].dest_path, "/big/file7");
  ASSERT_EQ(scans.rows(), 1);
  EXPECT_EQ(scans.int64(0, 0), 0);
}

// A queue filled faster than autovacuum analyzes it (a first catch-up queues thousands of
// changes in a second): the scheduler's check before each claim brings the statistics up
// to date, and the claim's look-up of each path goes through the path index.
TEST_F(QueueTest, AFreshlyFilledQueueIsAnalyzedBeforeItIsClaimed) {
  conn_->exec(
      "INSERT INTO timewarp.items (op, path, source_root) "
      "SELECT 'UPDATE', '/big/file' || g, '/big' FROM generate_series(1, 5000) g");
  EXPECT_TRUE(queue_->analyze_if_stale());
  EXPECT_FALSE(queue_->analyze_if_stale()) << "the statistics know the rows now";
  const auto claim = claim_counting_scans(Strategy::Fifo);
  EXPECT_EQ(claim.claimed, 1000u);
  // Not one scan: neither one per path of the batch, nor one to find the claimed rows
  // again for the UPDATE (a hash join over the whole table, which the planner picks for an
  // IN over the batch at this size).
  EXPECT_EQ(claim.seq_scans, 0);
  // A queue that stays small is not analyzed at every claim.
  EXPECT_FALSE(queue_->analyze_if_stale());
}

// A new queue has no statistics at all: its first changes are analyzed before the first
// claim, however few (without statistics the claim's look-up of each path of its batch
// scans every waiting row); an empty one is not.
TEST_F(QueueTest, ANeverAnalyzedQueueIsAnalyzedAtItsFirstClaim) {
  const auto reltuples = [&] {
    return conn_->query("SELECT reltuples FROM pg_class WHERE oid = 'timewarp.items'::regclass")
        .text(0, 0);
  };
  ASSERT_EQ(reltuples(), "-1") << "the test needs a table never analyzed";
  EXPECT_FALSE(queue_->analyze_if_stale()) << "nothing to learn from an empty queue";
  conn_->exec(
      "INSERT INTO timewarp.items (op, path, source_root) "
      "SELECT 'UPDATE', '/small/file' || g, '/small' FROM generate_series(1, 600) g");
  EXPECT_TRUE(queue_->analyze_if_stale());
  EXPECT_EQ(reltuples(), "600");
  EXPECT_FALSE(queue_->analyze_if_stale()) << "the statistics know the rows now";
}

TEST_F(QueueTest, StrategiesOrderTheClaims) {
  auto batch = items(4);
  batch[1].priority = 5;
  batch[3].priority = 9;
  const auto ids = queue_->enqueue(batch);
  auto lifo = queue_->claim({sid_, 1, Strategy::Lifo, 60});
  ASSERT_EQ(lifo.size(), 1u);
  EXPECT_EQ(lifo[0].id, ids[3]);
  auto priority = queue_->claim({sid_, 2, Strategy::Priority, 60});
  ASSERT_EQ(priority.size(), 2u);
  EXPECT_EQ(priority[0].id, ids[1]);  // 9 was taken by lifo; 5 is next
  EXPECT_EQ(priority[1].id, ids[0]);
}

TEST_F(QueueTest, FairTakesEveryRootInTurn) {
  std::vector<NewItem> batch;
  for (int i = 0; i < 50; ++i) batch.push_back({Op::Update, "/busy/f" + std::to_string(i), "", "/busy", 0, {}, {}});
  batch.push_back({Op::Update, "/quiet/a", "", "/quiet", 0, {}, {}});
  batch.push_back({Op::Update, "/quiet/b", "", "/quiet", 0, {}, {}});
  batch.push_back({Op::Update, "/other/x", "", "/other", 0, {}, {}});
  queue_->enqueue(batch);
  // Under fifo a batch of 6 would be all /busy; fair gives each root its turn.
  const auto claimed = queue_->claim({sid_, 6, Strategy::Fair, 60});
  ASSERT_EQ(claimed.size(), 6u);
  std::map<std::string, int> per_root;
  for (const auto& item : claimed) per_root[item.path.substr(0, item.path.find('/', 1))]++;
  EXPECT_EQ(per_root["/busy"], 3);
  EXPECT_EQ(per_root["/quiet"], 2);
  EXPECT_EQ(per_root["/other"], 1);
}

TEST_F(QueueTest, CoalesceFoldsChangesToOnePath) {
  const auto ids = queue_->enqueue(std::vector<NewItem>{
      {Op::Update, "/src/a", "", "/src", 0, {}, {}},
      {Op::Update, "/src/b", "", "/src", 0, {}, {}},
      {Op::Stat, "/src/a", "", "/src", 0, {}, {}},     // a STAT never hides the UPDATE
      {Op::Update, "/src/c", "", "/src", 0, {}, {}},
      {Op::Delete, "/src/b", "", "/src", 0, {}, {}},   // the newest op wins
      {Op::Update, "/src/m", "", "/src", 0, {}, {}},
      {Op::Move, "/src/m", "/src/n", "/src", 0, {}, {}},
      {Op::Update, "/src/m", "", "/src", 0, {}, {}},   // a pending move keeps m's order
  });
  // A batch of 2 claims a and b, and folds their later changes in with them.
  auto first = queue_->claim({sid_, 2, Strategy::Fifo, 60, true});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].id, ids[0]);
  EXPECT_EQ(first[0].op, Op::Update);
  EXPECT_EQ(first[0].followers, std::vector<std::int64_t>{ids[2]});
  EXPECT_EQ(first[1].id, ids[1]);
  EXPECT_EQ(first[1].op, Op::Delete);
  EXPECT_EQ(first[1].followers, std::vector<std::int64_t>{ids[4]});
  // Each stands for its newest change; every id up to the claim's largest was handed out.
  EXPECT_EQ(first[0].order.newest, ids[2]);
  EXPECT_EQ(first[1].order.newest, ids[4]);
  EXPECT_EQ(first[0].order.horizon, ids[4]);
  EXPECT_EQ(first[1].order.horizon, ids[4]);
  auto rest = queue_->claim({sid_, 10, Strategy::Fifo, 60, true});
  ASSERT_EQ(rest.size(), 4u);  // c, m, the move, m again: nothing folded across the move
  for (const auto& item : rest) {
    EXPECT_TRUE(item.followers.empty()) << item.path;
    EXPECT_EQ(item.order.newest, item.id);
    EXPECT_EQ(item.order.horizon, ids[7]);
  }
  EXPECT_EQ(rest[1].op, Op::Update);
  EXPECT_EQ(rest[2].op, Op::Move);
  EXPECT_EQ(rest[3].op, Op::Update);

  // Without coalesce every change is its own item.
  queue_->enqueue(std::vector<NewItem>{{Op::Update, "/src/z", "", "/src", 0, {}, {}},
                                       {Op::Update, "/src/z", "", "/src", 0, {}, {}}});
  EXPECT_EQ(queue_->claim({sid_, 10, Strategy::Fifo, 60, false}).size(), 2u);
}

// A SCAN looks at the directory's entries too: whatever folds into it, or it into, the
// item that runs is a SCAN (a later UPDATE or DELETE of the directory would not look at
// the entries whose changes the SCAN stands for).
TEST_F(QueueTest, CoalescingNeverHidesAScan) {
  auto ids = queue_->enqueue(std::vector<NewItem>{
      {Op::Scan, "/src/d", "", "/src", 0, {}, {}},
      {Op::Scan, "/src/e", "", "/src", 0, {}, {}},
      {Op::Update, "/src/d", "", "/src", 0, {}, {}},
      {Op::Delete, "/src/e", "", "/src", 0, {}, {}},
      {Op::Stat, "/src/f", "", "/src", 0, {}, {}},
      {Op::Scan, "/src/f", "", "/src", 0, {}, {}},
  });
  auto claimed = queue_->claim({sid_, 10, Strategy::Fifo, 60, true});
  ASSERT_EQ(claimed.size(), 3u);
  for (const auto& item : claimed) {
    EXPECT_EQ(item.op, Op::Scan) << item.path;
    EXPECT_EQ(item.followers.size(), 1u) << item.path;
  }
  EXPECT_EQ(claimed[0].order.newest, ids[2]);
  EXPECT_EQ(claimed[1].order.newest, ids[3]);
  EXPECT_EQ(claimed[2].order.newest, ids[5]);
}

TEST_F(QueueTest, CompleteOnlyFromTheLeaseHolder) {
  const auto ids = queue_->enqueue(items(2));
  const auto other = queue_->register_scheduler("other-host", 2, "fifo", 10, 1);
  const auto claimed = queue_->claim({sid_, 10, Strategy::Fifo, 60});
  ASSERT_EQ(claimed.size(), 2u);
  std::vector<Completion> done{{ids[0], 100, 5, 1.7e9, 1.7e9 + 1, {}}};
  EXPECT_EQ(queue_->complete(other, done), 0);  // not the holder
  EXPECT_EQ(queue_->complete(sid_, done), 1);
  EXPECT_EQ(queue_->complete(sid_, done), 0);   // not twice
  EXPECT_EQ(db_->scalar("SELECT status || ' ' || archive_bytes FROM timewarp.items WHERE id = " +
                        std::to_string(ids[0])),
            "COMPLETED 100");
}

TEST_F(QueueTest, RetryBacksOffUntilMaxAttemptsThenFails) {
  const auto ids = queue_->enqueue(items(1));
  const RetryPolicy policy{3, 0.0, 0.0};  // no delay: claimable again at once
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const auto claimed = queue_->claim({sid_, 10, Strategy::Fifo, 60});
    ASSERT_EQ(claimed.size(), 1u) << "attempt " << attempt;
    const auto outcome = queue_->fail(sid_, std::vector<Failure>{{ids[0], false, "busy", 0, 0}}, policy);
    EXPECT_EQ(outcome.retried, attempt < 3 ? 1 : 0);
    EXPECT_EQ(outcome.failed, attempt < 3 ? 0 : 1);
  }
  EXPECT_EQ(db_->scalar("SELECT status || ' ' || attempts || ' ' || last_error FROM timewarp.items"),
            "FAILED 3 busy");
}

TEST_F(QueueTest, RetryDelayGrowsAndHoldsTheItemBack) {
  queue_->enqueue(items(1));
  const RetryPolicy policy{10, 100.0, 1000.0};
  auto claimed = queue_->claim({sid_, 10, Strategy::Fifo, 60});
  queue_->fail(sid_, std::vector<Failure>{{claimed[0].id, false, "busy", 0, 0}}, policy);
  EXPECT_TRUE(queue_->claim({sid_, 10, Strategy::Fifo, 60}).empty());
  const double delay = std::stod(db_->scalar(
      "SELECT extract(epoch FROM not_before - now()) FROM timewarp.items"));
  EXPECT_GT(delay, 45.0);   // base 100 s, jitter keeps at least half
  EXPECT_LE(delay, 100.0);
  const auto counts = queue_->counts();
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.claimable, 0);
  ASSERT_TRUE(counts.next_retry_in.has_value());
}

TEST_F(QueueTest, PermanentFailureFailsAtOnce) {
  queue_->enqueue(items(1));
  auto claimed = queue_->claim({sid_, 10, Strategy::Fifo, 60});
  auto outcome = queue_->fail(sid_, std::vector<Failure>{{claimed[0].id, true, "denied", 0, 0}}, {});
  EXPECT_EQ(outcome.failed, 1);
  EXPECT_EQ(db_->scalar("SELECT status FROM timewarp.items"), "FAILED");
}

TEST_F(QueueTest, ReleaseAndLeaseRecovery) {
  queue_->enqueue(items(3));
  auto claimed = queue_->claim({sid_, 10, Strategy::Fifo, 0.001});
  ASSERT_EQ(claimed.size(), 3u);
  EXPECT_EQ(queue_->release(sid_, std::vector<std::int64_t>{claimed[0].id}), 1);
  ASSERT_TRUE(test::wait_until([&] {
    return db_->count("SELECT count(*) FROM timewarp.items WHERE lease_until < now()") == 2;
  }, std::chrono::seconds(5)));
  EXPECT_EQ(queue_->recover_expired_leases(5), 2);
  const auto counts = queue_->counts();
  EXPECT_EQ(counts.claimable, 3);
  EXPECT_EQ(db_->count("SELECT sum(attempts) FROM timewarp.items"), 2);  // released one is not an attempt
}

// Two claimers hammer one database concurrently: every item goes to exactly one of them.
TEST_F(QueueTest, TwoClaimersNeverReceiveTheSameItem) {
  constexpr int kItems = 6000;
  queue_->enqueue(items(kItems));
  const auto other = queue_->register_scheduler("other-host", 2, "fifo", 10, 1);
  std::vector<std::int64_t> got[2];
  auto claimer = [&](int who, std::int64_t sid) {
    Connection conn(db_->conninfo());
    Queue q(conn);
    while (true) {
      auto batch = q.claim({sid, 37, Strategy::Fifo, 60});
      if (batch.empty()) {
        if (!q.has_claimable()) break;
        continue;
      }
      for (const auto& item : batch) got[who].push_back(item.id);
    }
  };
  std::thread a(claimer, 0, sid_);
  std::thread b(claimer, 1, other);
  a.join();
  b.join();
  EXPECT_GT(got[0].size(), 0u);
  EXPECT_GT(got[1].size(), 0u);
  std::set<std::int64_t> all(got[0].begin(), got[0].end());
  for (const auto id : got[1]) EXPECT_TRUE(all.insert(id).second) << "item " << id << " claimed twice";
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kItems));
  EXPECT_EQ(db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'DISPATCHED'"), kItems);
}

TEST_F(QueueTest, StatusViewAnswersHowFarBehind) {
  queue_->enqueue(items(5));
  auto claimed = queue_->claim({sid_, 2, Strategy::Fifo, 60});
  queue_->complete(sid_, std::vector<Completion>{{claimed[0].id, 1, 1, 1.7e9, 1.7e9, {}}});
  queue_->fail(sid_, std::vector<Failure>{{claimed[1].id, true, "denied", 1.7e9, 1.7e9}}, {});
  const auto c = queue_->counts();
  EXPECT_EQ(c.claimable, 3);
  EXPECT_EQ(c.completed, 1);
  EXPECT_EQ(c.failed, 1);
  EXPECT_TRUE(c.oldest_claimable_age.has_value());
}

}  // namespace
}  // namespace tw::db
