// run_ordered (archive/format2/ordered_pipeline.hpp): every item prepared, worked on and
// finished once, finished in order, never more than `depth` between prepare and finish,
// and nothing worked on once it was told to stop.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "archive/format2/ordered_pipeline.hpp"

namespace tw::archive {
namespace {

struct Trace {
  std::vector<std::size_t> prepared, finished;
  std::vector<std::atomic<int>> worked;
  std::atomic<std::size_t> worked_count{0};
  std::size_t most_in_flight = 0;
  explicit Trace(std::size_t count) : worked(count) {}
};

// Runs `count` items on `workers` threads, each worked on for a seeded random few
// microseconds; stops when asked at `stop_at` (prepare, or finish when `stop_in_finish`).
void run(Trace& t, std::size_t count, std::size_t depth, std::size_t workers, std::size_t stop_at,
         bool stop_in_finish, std::uint32_t seed) {
  std::vector<int> pause(count);
  std::mt19937 rng(seed);
  for (auto& p : pause) p = static_cast<int>(rng() % 200);
  run_ordered(
      count, depth, workers,
      [&](std::size_t i) {
        if (!stop_in_finish && i == stop_at) return false;
        t.prepared.push_back(i);
        t.most_in_flight = std::max(t.most_in_flight, t.prepared.size() - t.finished.size());
        return true;
      },
      [&](std::size_t i) {
        std::this_thread::sleep_for(std::chrono::microseconds(pause[i]));
        ++t.worked[i];
        ++t.worked_count;
      },
      [&](std::size_t i) {
        EXPECT_EQ(t.worked[i].load(), 1) << "item " << i << " finished before its work";
        t.finished.push_back(i);
        return !(stop_in_finish && i == stop_at);
      });
}

TEST(OrderedPipelineTest, EveryItemOnceAndInOrderWithinTheDepth) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    const std::size_t count = seed * 7 % 60;
    const std::size_t depth = 1 + seed % 6;
    const std::size_t workers = seed % 4;  // 0: all on the calling thread
    SCOPED_TRACE(testing::Message() << "seed " << seed << " count " << count << " depth " << depth
                                    << " workers " << workers);
    Trace t(count);
    run(t, count, depth, workers, count, false, seed);
    ASSERT_EQ(t.finished.size(), count);
    for (std::size_t i = 0; i < count; ++i) {
      EXPECT_EQ(t.prepared[i], i);
      EXPECT_EQ(t.finished[i], i);
      EXPECT_EQ(t.worked[i].load(), 1);
    }
    EXPECT_LE(t.most_in_flight, std::max<std::size_t>(depth, 1));
  }
}

TEST(OrderedPipelineTest, NothingIsWorkedOnOnceStopped) {
  for (const bool in_finish : {false, true}) {
    for (std::uint32_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " in finish " << in_finish);
      const std::size_t count = 40, depth = 4, stop_at = seed * 3;
      Trace t(count);
      run(t, count, depth, 2, stop_at, in_finish, seed);
      // Stopped in prepare: the items before it prepared, none finished from it on.
      // Stopped in finish: the items up to it finished, at most `depth` prepared beyond.
      if (in_finish) {
        EXPECT_EQ(t.finished.size(), stop_at + 1);
        EXPECT_LE(t.prepared.size(), stop_at + depth);
      } else {
        EXPECT_EQ(t.prepared.size(), stop_at);
        EXPECT_LE(t.finished.size(), stop_at);
      }
      EXPECT_LE(t.worked_count.load(), t.prepared.size());
      for (std::size_t i = t.prepared.size(); i < count; ++i) EXPECT_EQ(t.worked[i].load(), 0);
    }
  }
}

}  // namespace
}  // namespace tw::archive
