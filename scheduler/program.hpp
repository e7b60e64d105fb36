// timewarp-scheduler's whole program: the signals it ignores or reads, the command line,
// logging, then Scheduler::run(). main.cpp calls it with no hooks; a test executable
// (tests/support/hooked_scheduler.cpp) calls it with SchedulerHooks of its own, so tests
// run the real program without a test switch in it.
#pragma once

#include "scheduler/scheduler.hpp"

namespace tw::scheduler {

// Returns the process exit code.
int program_main(int argc, char** argv, SchedulerHooks hooks = {});

}  // namespace tw::scheduler
