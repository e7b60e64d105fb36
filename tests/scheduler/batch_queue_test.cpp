#include "scheduler/batch_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/paths.hpp"

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

// The index of paths in flight answers as comparing with each of them would
// (path_within both ways), for random sets of paths, adds and removes.
TEST(BatchQueue, BusyPathsAnswerAsPathWithinBothWays) {
  std::mt19937 random(12345);
  const std::vector<std::string> parts = {"a", "b", "ab", "", "a b"};
  const auto random_path = [&] {
    std::string p = random() % 8 == 0 ? "" : "/";
    const int depth = static_cast<int>(random() % 4);
    for (int i = 0; i < depth; ++i) {
      if (i > 0 || p.empty()) p += "/";
      p += parts[random() % parts.size()];
    }
    return p.empty() ? std::string("/") : p;
  };
  for (int round = 0; round < 200; ++round) {
    BusyPaths busy;
    std::vector<std::string> held;
    for (int step = 0; step < 12; ++step) {
      if (!held.empty() && random() % 3 == 0) {
        const auto at = held.begin() + static_cast<std::ptrdiff_t>(random() % held.size());
        busy.remove(*at);
        held.erase(at);
      } else {
        held.push_back(random_path());
        busy.add(held.back());
      }
      for (int probe = 0; probe < 8; ++probe) {
        const std::string p = random_path();
        const bool expected = std::any_of(held.begin(), held.end(), [&](const std::string& h) {
          return path_within(p, h) || path_within(h, p);
        });
        ASSERT_EQ(busy.related(p), expected) << "probe " << p << " against " << held.size();
      }
    }
    EXPECT_EQ(busy.empty(), held.empty());
  }
}

// Which item may go next, against a reference that compares each waiting item with every
// path in flight and every path held back before it: random queues of UPDATEs and MOVEs
// over a small tree, with items popped and finished in random order.
TEST(BatchQueue, ItemsGoInTheOrderOfTheirPathsWhateverIsInFlight) {
  std::mt19937 random(777);
  const std::vector<std::string> names = {"a", "b", "a b"};
  const auto random_path = [&] {
    std::string p;
    const int depth = 1 + static_cast<int>(random() % 3);
    for (int i = 0; i < depth; ++i) p += "/" + names[random() % names.size()];
    return p;
  };
  const auto paths_of = [](const db::ClaimedItem& item) {
    std::vector<std::string> out{item.path};
    if (item.op == Op::Move) out.push_back(item.dest_path);
    return out;
  };
  for (int round = 0; round < 100; ++round) {
    BatchQueue queue;
    std::vector<db::ClaimedItem> waiting;  // the reference's copy, in order
    std::vector<db::ClaimedItem> flying;
    std::int64_t next_id = 1;
    for (int step = 0; step < 40; ++step) {
      const auto op = random() % 4;
      if (op == 0) {
        std::vector<db::ClaimedItem> more;
        for (int n = 1 + static_cast<int>(random() % 5); n > 0; --n) {
          db::ClaimedItem item;
          item.id = next_id++;
          item.op = random() % 4 == 0 ? Op::Move : Op::Update;
          item.path = random_path();
          if (item.op == Op::Move) item.dest_path = random_path();
          more.push_back(item);
        }
        waiting.insert(waiting.end(), more.begin(), more.end());
        queue.push(std::move(more));
      } else if (op == 1 && !flying.empty()) {
        const auto at = flying.begin() + static_cast<std::ptrdiff_t>(random() % flying.size());
        queue.finished(at->id);
        flying.erase(at);
      } else {
        std::vector<std::string> busy;
        for (const auto& f : flying) {
          for (auto& p : paths_of(f)) busy.push_back(std::move(p));
        }
        std::optional<std::size_t> expected;
        for (std::size_t i = 0; i < waiting.size() && !expected; ++i) {
          const auto paths = paths_of(waiting[i]);
          const bool conflict = std::any_of(paths.begin(), paths.end(), [&](const auto& p) {
            return std::any_of(busy.begin(), busy.end(), [&](const std::string& b) {
              return path_within(p, b) || path_within(b, p);
            });
          });
          if (!conflict) expected = i;
          busy.insert(busy.end(), paths.begin(), paths.end());
        }
        const auto popped = queue.try_pop();
        ASSERT_EQ(popped.has_value(), expected.has_value()) << "round " << round;
        if (!popped) continue;
        ASSERT_EQ(popped->id, waiting[*expected].id) << "round " << round << " step " << step;
        flying.push_back(waiting[*expected]);
        waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(*expected));
      }
    }
  }
}

}  // namespace
}  // namespace tw::scheduler
