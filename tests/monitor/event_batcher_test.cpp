#include "monitor/event_batcher.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tw::monitor {
namespace {

using namespace std::chrono_literals;

std::string show(const std::vector<Change>& changes) {
  std::string out;
  for (const auto& c : changes) {
    if (!out.empty()) out += " ";
    out += std::string(to_string(c.op)) + ":" + c.path;
    if (c.op == Op::Move) out += ">" + c.dest;
  }
  return out;
}

TEST(EventBatcher, RepeatedChangesToOnePathBecomeOneItem) {
  EventBatcher b({100ms, 1000});
  for (int i = 0; i < 50; ++i) b.add(Change::update("/s/a"));
  b.add(Change::stat("/s/a"));
  b.add(Change::stat("/s/b"));
  b.add(Change::stat("/s/b"));
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(show(b.take()), "UPDATE:/s/a STAT:/s/b");
  EXPECT_EQ(b.size(), 0u);
  EXPECT_FALSE(b.due().has_value());
}

TEST(EventBatcher, StatThenUpdateIsAnUpdateAndKeepsTheLatestOrder) {
  EventBatcher b({100ms, 1000});
  b.add(Change::stat("/s/a"));
  b.add(Change::update("/s/b"));
  b.add(Change::update("/s/a"));
  EXPECT_EQ(show(b.take()), "UPDATE:/s/b UPDATE:/s/a");
}

TEST(EventBatcher, DeleteWinsAndARecreatedPathIsAnUpdate) {
  EventBatcher b({100ms, 1000});
  b.add(Change::update("/s/a"));
  b.add(Change::remove("/s/a"));
  EXPECT_EQ(show(b.take()), "DELETE:/s/a");
  b.add(Change::remove("/s/a"));
  b.add(Change::update("/s/a"));
  EXPECT_EQ(show(b.take()), "UPDATE:/s/a");
  b.add(Change::remove("/s/a"));
  b.add(Change::stat("/s/a"));
  EXPECT_EQ(show(b.take()), "UPDATE:/s/a");
}

// A SCAN stands for changes of the directory's entries that no event told of: a later
// UPDATE or STAT of the directory does not hide it; a DELETE does (the directory is gone,
// and whatever appears in its place comes with changes of its own).
TEST(EventBatcher, AScanStaysAScanUntilItsDirectoryIsDeleted) {
  EventBatcher b({100ms, 1000});
  b.add(Change::scan("/s/d", 40));
  b.add(Change::update("/s/d", true));
  b.add(Change::stat("/s/d", true));
  b.add(Change::update("/s/e", true));
  b.add(Change::scan("/s/e", 3));
  EXPECT_EQ(show(b.take()), "SCAN:/s/d SCAN:/s/e");
  b.add(Change::scan("/s/d", 40));
  b.add(Change::remove("/s/d", true));
  EXPECT_EQ(show(b.take()), "DELETE:/s/d");
}

// A SCAN fills the window by the changes it stands for, so a scan's first directories
// reach the database at once, not after event_delay.
TEST(EventBatcher, AScanCountsForTheChangesItStandsFor) {
  int notified = 0;
  EventBatcher b({10s, 100, 10}, [&] { ++notified; });
  b.add(Change::scan("/s/d", 6));
  EXPECT_GT(*b.due(), EventBatcher::Clock::now());
  b.add(Change::scan("/s/e", 4));
  EXPECT_EQ(notified, 2);  // opened, then full
  EXPECT_LE(*b.due(), EventBatcher::Clock::now());
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(b.take().size(), 2u);
  EXPECT_EQ(b.window_limit(), 20u) << "a full window doubles the next";
  // Folding a SCAN with a change of its directory keeps the larger weight, not the sum.
  b.add(Change::scan("/s/d", 15));
  b.add(Change::update("/s/d", true));
  EXPECT_GT(*b.due(), EventBatcher::Clock::now());
  b.add(Change::scan("/s/e", 5));
  EXPECT_LE(*b.due(), EventBatcher::Clock::now());
}

TEST(EventBatcher, DeletingADirectoryDropsTheWaitingChangesBeneathItButNoMove) {
  EventBatcher b({100ms, 1000});
  b.add(Change::update("/s/d/x"));
  b.add(Change::update("/s/d-sibling"));
  b.add(Change::remove("/s/d/y"));
  b.add(Change::update("/s/d/e/z"));
  b.add(Change::move("/s/d/m", "/s/out"));
  b.add(Change::move("/s/in", "/s/d/n"));
  b.add(Change::remove("/s/d", true));
  b.add(Change::update("/s/d/new"));  // after the delete: kept, after it
  EXPECT_EQ(show(b.take()),
            "UPDATE:/s/d-sibling MOVE:/s/d/m>/s/out MOVE:/s/in>/s/d/n DELETE:/s/d UPDATE:/s/d/new");
}

TEST(EventBatcher, MoveDropsWaitingChangesOfItsSourceAndKeepsThoseOfItsDestination) {
  EventBatcher b({100ms, 1000});
  b.add(Change::update("/s/a"));
  b.add(Change::update("/s/b"));  // an older b, replaced by the rename: reconciled by this
  b.add(Change::move("/s/a", "/s/b"));
  EXPECT_EQ(show(b.take()), "UPDATE:/s/b MOVE:/s/a>/s/b");
  b.add(Change::update("/s/a"));
  b.add(Change::move("/s/a", "/s/b"));
  b.add(Change::update("/s/b"));  // the watcher's follow-up: kept after the move
  EXPECT_EQ(show(b.take()), "MOVE:/s/a>/s/b UPDATE:/s/b");
}

TEST(EventBatcher, DirectoryMoveDropsChangesBeneathTheOldNameAndKeepsThoseBeneathTheNew) {
  EventBatcher b({100ms, 1000});
  b.add(Change::update("/s/d/f"));
  b.add(Change::remove("/s/e/old"));  // emptied e before d was renamed over it
  b.add(Change::update("/s/other"));
  b.add(Change::move("/s/d", "/s/e", true));
  EXPECT_EQ(show(b.take()), "DELETE:/s/e/old UPDATE:/s/other MOVE:/s/d>/s/e");
}

TEST(EventBatcher, ChainedMovesBecomeOneAndTheMiddleNameIsReconciled) {
  EventBatcher b({100ms, 1000});
  b.add(Change::move("/s/a", "/s/b"));
  b.add(Change::update("/s/b"));  // written while at b: the MOVE to c looks at it
  b.add(Change::move("/s/b", "/s/c"));
  EXPECT_EQ(show(b.take()), "MOVE:/s/a>/s/c DELETE:/s/b");
  b.add(Change::move("/s/a", "/s/b"));
  b.add(Change::move("/s/b", "/s/a"));
  EXPECT_EQ(show(b.take()), "UPDATE:/s/a DELETE:/s/b");
  b.add(Change::move("/s/A", "/s/B", true));
  b.add(Change::update("/s/B/x"));
  b.add(Change::move("/s/B", "/s/C", true));
  EXPECT_EQ(show(b.take()), "MOVE:/s/A>/s/C DELETE:/s/B");
}

// mv log log.1; echo new > log; rm log.1
TEST(EventBatcher, RotatedLogKeepsTheNewFileUnderTheOldName) {
  EventBatcher b({100ms, 1000});
  b.add(Change::move("/s/log", "/s/log.1"));
  b.add(Change::update("/s/log"));
  b.add(Change::remove("/s/log.1"));
  EXPECT_EQ(show(b.take()), "MOVE:/s/log>/s/log.1 UPDATE:/s/log DELETE:/s/log.1");
}

TEST(EventBatcher, AMovedPathDeletedAgainKeepsItsMove) {
  EventBatcher b({100ms, 1000});
  b.add(Change::move("/s/a", "/s/b"));
  b.add(Change::remove("/s/b"));
  EXPECT_EQ(show(b.take()), "MOVE:/s/a>/s/b DELETE:/s/b");
  b.add(Change::move("/s/a", "/s/d/b"));
  b.add(Change::remove("/s/d/b"));
  b.add(Change::remove("/s/d", true));
  EXPECT_EQ(show(b.take()), "MOVE:/s/a>/s/d/b DELETE:/s/d");
}

// mv X D/X; mkdir X; echo n > X/n; rm -r D: the new X and its entry survive the DELETE of D.
TEST(EventBatcher, ADirectoryMadeAgainUnderAMovedAwayNameKeepsItsNewEntries) {
  EventBatcher b({100ms, 1000});
  b.add(Change::move("/s/X", "/s/D/X", true));
  b.add(Change::update("/s/X", true));
  b.add(Change::update("/s/X/n"));
  b.add(Change::remove("/s/D/X/old"));
  b.add(Change::remove("/s/D/X", true));
  b.add(Change::remove("/s/D", true));
  EXPECT_EQ(show(b.take()), "MOVE:/s/X>/s/D/X UPDATE:/s/X UPDATE:/s/X/n DELETE:/s/D");
}

TEST(EventBatcher, AFoldedChangeKeepsTheHigherPriority) {
  EventBatcher b({100ms, 1000});
  Change rescan = Change::update("/s/a");
  rescan.priority = kRescanPriority;
  b.add(rescan);
  b.add(Change::stat("/s/a"));
  b.add(rescan);
  const auto taken = b.take();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].op, Op::Update);
  EXPECT_EQ(taken[0].priority, kLivePriority);
}

TEST(EventBatcher, DueAfterTheDelayFromTheFirstChangeOrAtOnceWhenFull) {
  int notified = 0;
  EventBatcher b({200ms, 3}, [&] { ++notified; });
  EXPECT_FALSE(b.due().has_value());
  const auto before = EventBatcher::Clock::now();
  b.add(Change::update("/s/a"));
  EXPECT_EQ(notified, 1);
  ASSERT_TRUE(b.due().has_value());
  EXPECT_GE(*b.due(), before + 200ms);
  EXPECT_LE(*b.due(), EventBatcher::Clock::now() + 200ms);
  b.add(Change::update("/s/b"));
  EXPECT_EQ(notified, 1);  // the window was open already
  b.add(Change::update("/s/c"));
  EXPECT_EQ(notified, 2);  // full
  EXPECT_LE(*b.due(), EventBatcher::Clock::now());
}

TEST(EventBatcher, ABurstStartsWithASmallWindowThatDoublesUntilTheBurstEnds) {
  EventBatcher b({10s, 8, 2});
  int next = 0;
  // Adds changes until the window is due at once; returns how many it took.
  const auto fill = [&] {
    int added = 0;
    while (!b.due() || *b.due() > EventBatcher::Clock::now()) {
      b.add(Change::update("/s/f" + std::to_string(next++)));
      ++added;
    }
    return added;
  };
  EXPECT_EQ(b.window_limit(), 2u);
  EXPECT_EQ(fill(), 2);
  EXPECT_EQ(b.take().size(), 2u);
  EXPECT_EQ(fill(), 4);
  EXPECT_EQ(b.take().size(), 4u);
  EXPECT_EQ(fill(), 8);
  EXPECT_EQ(b.take().size(), 8u);
  EXPECT_EQ(fill(), 8);  // never beyond max_items
  EXPECT_EQ(b.take().size(), 8u);
  // A window taken before it filled ends the burst: the next one starts small again.
  b.add(Change::update("/s/quiet"));
  EXPECT_EQ(b.take().size(), 1u);
  EXPECT_EQ(b.window_limit(), 2u);
  EXPECT_EQ(fill(), 2);
}

TEST(EventBatcher, WithoutAFirstWindowEveryWindowIsFullAtMaxItems) {
  EventBatcher b({10s, 5});
  EXPECT_EQ(b.window_limit(), 5u);
  for (int i = 0; i < 5; ++i) b.add(Change::update("/s/f" + std::to_string(i)));
  EXPECT_LE(*b.due(), EventBatcher::Clock::now());
  b.take();
  EXPECT_EQ(b.window_limit(), 5u);
}

TEST(EventBatcher, RestoredChangesComeFirstAndAreDueAtTheRetryTime) {
  EventBatcher b({10ms, 1000});
  b.add(Change::update("/s/a"));
  auto taken = b.take();
  b.add(Change::update("/s/b"));
  const auto retry = EventBatcher::Clock::now() + 5s;
  b.restore(std::move(taken), retry);
  EXPECT_EQ(*b.due(), retry);
  EXPECT_EQ(show(b.take()), "UPDATE:/s/a UPDATE:/s/b");
  EXPECT_FALSE(b.due().has_value());
}

TEST(EventBatcher, SafeFromSeveralThreads) {
  EventBatcher b({1ms, 100000});
  std::atomic<bool> done{false};
  std::size_t taken = 0;
  std::thread producer([&] {
    for (int i = 0; i < 20000; ++i) b.add(Change::update("/s/f" + std::to_string(i)));
    done = true;
  });
  while (!done.load() || b.size() > 0) taken += b.take().size();
  producer.join();
  EXPECT_EQ(taken, 20000u);
}

}  // namespace
}  // namespace tw::monitor
