// timewarp-hooked-scheduler: the real timewarp-scheduler program (program_main) with the
// test seams of SchedulerHooks filled from its environment, so production code reads no
// test switch. Integration tests hand it to the monitor as --scheduler-exe
// (test::hooked_scheduler_exe()); the monitor passes its environment on.
//
//   TIMEWARP_TEST_PAUSE_BEFORE_READY=DIR  the first READY waits (at most a minute) between
//       the scheduler's last look at the queue and the write of READY: it creates
//       DIR/paused and goes on once DIR/release exists. Tests add work in the window
//       where a wake-up could be lost.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include "scheduler/program.hpp"

namespace {

void pause_before_first_ready(const std::filesystem::path& dir, bool& done) {
  if (done) return;
  done = true;
  const auto paused = dir / "paused";
  const auto release = dir / "release";
  if (std::FILE* f = std::fopen(paused.c_str(), "w")) std::fclose(f);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!std::filesystem::exists(release) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  tw::scheduler::SchedulerHooks hooks;
  const char* pause_dir = std::getenv("TIMEWARP_TEST_PAUSE_BEFORE_READY");
  if (pause_dir != nullptr && *pause_dir != '\0') {
    hooks.before_ready = [dir = std::filesystem::path(pause_dir), done = false]() mutable {
      pause_before_first_ready(dir, done);
    };
  }
  return tw::scheduler::program_main(argc, argv, std::move(hooks));
}
