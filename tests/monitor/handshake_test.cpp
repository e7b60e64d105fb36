#include "monitor/handshake.hpp"

#include <gtest/gtest.h>

namespace tw::monitor {
namespace {

TEST(Handshake, ReadyOnlyWhenWorkAndNotAlreadySent) {
  Handshake h;
  EXPECT_FALSE(h.on_possible_work(false));
  EXPECT_TRUE(h.on_possible_work(true));
  EXPECT_TRUE(h.ready_sent());
  EXPECT_FALSE(h.wants_check());
  EXPECT_FALSE(h.on_possible_work(true));  // scheduler is already draining
}

TEST(Handshake, SchedulerReadyClearsTheFlagAndRechecks) {
  Handshake h;
  ASSERT_TRUE(h.on_possible_work(true));
  // Items were added while the scheduler drained: its READY must lead to another READY.
  EXPECT_TRUE(h.on_scheduler_ready(true));
  EXPECT_TRUE(h.ready_sent());
  // Nothing new: the flag stays down until work arrives.
  EXPECT_FALSE(h.on_scheduler_ready(false));
  EXPECT_FALSE(h.ready_sent());
  EXPECT_TRUE(h.wants_check());
}

TEST(Handshake, RestartForgetsWhatTheOldSchedulerWasTold) {
  Handshake h;
  ASSERT_TRUE(h.on_possible_work(true));
  h.on_scheduler_restarted();
  EXPECT_TRUE(h.on_possible_work(true));
}

}  // namespace
}  // namespace tw::monitor
