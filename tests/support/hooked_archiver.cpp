// timewarp-hooked-archiver: the real timewarp-archiver program (program_main) with the
// test seams of ArchiverHooks filled from its environment, so production code reads no
// test switch. The archiver tests run it in place of timewarp-archiver
// (hooked_archiver_exe() in tests/archiver/crash_test.cpp).
//
//   TIMEWARP_ARCHIVER_CRASH_AT_STEP=N  the process kills itself with SIGKILL just before its
//       Nth durable write step, to prove that a crash at any point leaves a valid archive
//       (tests/archiver/crash_test.cpp).
//   --hook-clock-offset=F (an argument, before or among the archiver's own, so it passes
//       through the scheduler, which hands its archivers no test variable): archive times
//       are the real clock plus the offset in file F (signed nanoseconds, in decimal),
//       which the test rewrites to move the clock forward (the convergence trial with a
//       retention policy over weeks). A missing or unreadable file counts as offset 0.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archiver/program.hpp"
#include "common/time.hpp"

int main(int argc, char** argv) {
  tw::archiver::ArchiverHooks hooks;
  const char* crash_at = std::getenv("TIMEWARP_ARCHIVER_CRASH_AT_STEP");
  const long target = crash_at != nullptr ? std::strtol(crash_at, nullptr, 10) : 0;
  if (target > 0) {
    // Steps come from the request thread and from the store's sync thread.
    hooks.before_write_step = [target,
                               count = std::make_shared<std::atomic<long>>(0)](std::string_view) {
      if (++*count == target) ::kill(::getpid(), SIGKILL);
    };
  }
  // The hook's own arguments are taken out; the rest are the archiver's.
  constexpr std::string_view kClockFlag = "--hook-clock-offset=";
  std::vector<char*> args;
  std::string clock_file;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i > 0 && arg.starts_with(kClockFlag)) {
      clock_file = arg.substr(kClockFlag.size());
    } else {
      args.push_back(argv[i]);
    }
  }
  if (!clock_file.empty()) {
    hooks.now = [clock_file] {
      std::int64_t offset = 0;
      std::ifstream(clock_file) >> offset;
      return tw::now_ns() + offset;
    };
  }
  args.push_back(nullptr);
  return tw::archiver::program_main(static_cast<int>(args.size()) - 1, args.data(),
                                    std::move(hooks));
}
