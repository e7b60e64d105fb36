#include "scheduler/batch_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace tw::scheduler {
namespace {

std::vector<db::ClaimedItem> batch(int from, int n) {
  std::vector<db::ClaimedItem> out;
  for (int i = 0; i < n; ++i) {
    db::ClaimedItem item;
    item.id = from + i;
    item.path = "/x/" + std::to_string(from + i);
    item.batch_id = 1;
    out.push_back(item);
  }
  return out;
}

TEST(BatchQueue, PopsInOrderAndTracksInFlight) {
  BatchQueue q;
  std::atomic<bool> leave{false};
  q.push(batch(1, 3));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.high_water(), 3u);
  EXPECT_EQ(q.pop(leave)->id, 1);
  EXPECT_FALSE(q.idle());
  auto rest = q.take_all();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].id, 2);
  EXPECT_FALSE(q.idle());  // item 1 still in flight
  q.finished(1);
  EXPECT_TRUE(q.idle());
}

// The main thread is woken once when a refill is due and once when all work is done,
// never per item.
TEST(BatchQueue, WakesAtTheLowWaterMarkAndWhenIdleOnly) {
  int wakes = 0;
  BatchQueue q(2, [&] { ++wakes; });
  std::atomic<bool> leave{false};
  q.push(batch(1, 5));
  std::vector<std::int64_t> popped;
  for (int i = 0; i < 2; ++i) popped.push_back(q.pop(leave)->id);  // 4, then 3 waiting
  EXPECT_EQ(wakes, 0);
  popped.push_back(q.pop(leave)->id);  // 2 waiting: time to claim more
  EXPECT_EQ(wakes, 1);
  q.push(batch(6, 1));  // the refill; 3 waiting
  popped.push_back(q.pop(leave)->id);  // 2 waiting again
  EXPECT_EQ(wakes, 2);
  for (int i = 0; i < 2; ++i) popped.push_back(q.pop(leave)->id);
  EXPECT_EQ(wakes, 2);
  for (const auto id : popped) q.finished(id);  // the last one leaves the queue idle
  EXPECT_TRUE(q.idle());
  EXPECT_EQ(wakes, 3);
}

db::ClaimedItem change(std::int64_t id, Op op, std::string path, std::string dest = "") {
  db::ClaimedItem item;
  item.id = id;
  item.op = op;
  item.path = std::move(path);
  item.dest_path = std::move(dest);
  return item;
}

TEST(BatchQueue, ChangesToOnePathKeepTheirOrder) {
  BatchQueue q;
  std::atomic<bool> leave{false};
  q.push({change(1, Op::Move, "/d", "/e"),         // a directory move
          change(2, Op::Update, "/e/f"),           // inside its destination: must wait
          change(3, Op::Update, "/other"),         // unrelated: may go
          change(4, Op::Update, "/d"),             // the move's source: must wait
          change(5, Op::Stat, "/e/f")});           // behind a held-back item: must wait
  EXPECT_EQ(q.pop(leave)->id, 1);
  EXPECT_EQ(q.pop(leave)->id, 3);  // 2, 4 and 5 are held back while the move runs
  std::optional<db::ClaimedItem> next;
  std::thread waiter([&] { next = q.pop(leave); });
  q.finished(3);                    // not the move: nothing is freed
  q.finished(1);                    // the move is done
  waiter.join();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->id, 2);
  EXPECT_EQ(q.pop(leave)->id, 4);   // /d is unrelated to /e/f
  q.finished(2);
  EXPECT_EQ(q.pop(leave)->id, 5);   // after 2, same path
}

TEST(BatchQueue, SiblingNamesAreNotNested) {
  BatchQueue q;
  std::atomic<bool> leave{false};
  q.push({change(1, Op::Update, "/a/b"), change(2, Op::Update, "/a/bc"), change(3, Op::Update, "/a/b/c")});
  EXPECT_EQ(q.pop(leave)->id, 1);
  EXPECT_EQ(q.pop(leave)->id, 2);  // "/a/bc" is not inside "/a/b"
  EXPECT_EQ(q.size(), 1u);         // "/a/b/c" is, and waits
  q.finished(1);
  EXPECT_EQ(q.pop(leave)->id, 3);
}

TEST(BatchQueue, LeaveAndCloseWakeWaiters) {
  BatchQueue q;
  std::atomic<bool> leave{false};
  std::optional<db::ClaimedItem> got = db::ClaimedItem{};
  std::thread waiter([&] { got = q.pop(leave); });
  leave = true;
  q.wake_all();
  waiter.join();
  EXPECT_FALSE(got.has_value());

  std::atomic<bool> stay{false};
  std::thread closer_waiter([&] { got = q.pop(stay); });
  q.close();
  closer_waiter.join();
  EXPECT_FALSE(got.has_value());
}

TEST(BatchQueue, ManyConsumersEachItemOnce) {
  BatchQueue q;
  std::atomic<bool> leave{false};
  std::vector<std::thread> consumers;
  std::mutex mu;
  std::vector<std::int64_t> seen;
  for (int c = 0; c < 4; ++c) {
    consumers.emplace_back([&] {
      while (auto item = q.pop(leave)) {
        std::lock_guard lock(mu);
        seen.push_back(item->id);
        q.finished(item->id);
      }
    });
  }
  for (int b = 0; b < 50; ++b) q.push(batch(b * 100, 100));
  q.close();
  for (auto& t : consumers) t.join();
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 5000u);
  for (int i = 0; i < 5000; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);
}

}  // namespace
}  // namespace tw::scheduler
