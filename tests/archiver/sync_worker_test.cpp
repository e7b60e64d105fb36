// The sync thread of group commit (archiver/sync_worker.hpp): its done signal and its idle
// state agree, so the archiver, woken by the signal, never finds it busy with a job that
// has ended (it would then wait for a signal that never comes, holding its answers).
#include "archive/format2/sync_worker.hpp"

#include <poll.h>
#include <sched.h>

#include <gtest/gtest.h>

namespace tw::archive {
namespace {

TEST(SyncWorker, IsIdleWhenItSignalsItsLastJobDone) {
  // On one core the signal's reader runs as soon as it is woken, before the worker goes on:
  // where the worker signalled before it recorded the job's end, this found it busy.
  cpu_set_t before;
  ASSERT_EQ(::sched_getaffinity(0, sizeof before, &before), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &before)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
  int busy = 0;
  {
    SyncWorker worker;  // its thread starts with the first job, on that core too
    for (int round = 0; round < 2000; ++round) {
      worker.post([] {});
      struct pollfd fd = {worker.done_fd(), POLLIN, 0};
      ASSERT_EQ(::poll(&fd, 1, 10000), 1) << "round " << round;
      worker.clear_done();
      if (!worker.idle()) ++busy;
      worker.wait_idle();
    }
  }
  ASSERT_EQ(::sched_setaffinity(0, sizeof before, &before), 0);
  EXPECT_EQ(busy, 0) << "rounds where the worker was busy after its last job's signal";
}

}  // namespace
}  // namespace tw::archive
