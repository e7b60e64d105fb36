#include "scheduler/batch_queue.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace tw::scheduler {
namespace {

std::vector<db::ClaimedItem> batch(int from, int n) {
  std::vector<db::ClaimedItem> out;
  for (int i = 0; i < n; ++i) out.push_back({from + i, Op::Update, "/x", "", 0, 1});
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
  q.finished();
  EXPECT_TRUE(q.idle());
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
        q.finished();
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
