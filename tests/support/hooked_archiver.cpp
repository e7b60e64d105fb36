// timewarp-hooked-archiver: the real timewarp-archiver program (program_main) with the
// test seams of ArchiverHooks filled from its environment, so production code reads no
// test switch. The archiver tests run it in place of timewarp-archiver
// (hooked_archiver_exe() in tests/archiver/crash_test.cpp).
//
//   TIMEWARP_ARCHIVER_CRASH_AT_STEP=N  the process kills itself with SIGKILL just before its
//       Nth durable write step, to prove that a crash at any point leaves a valid archive
//       (tests/archiver/crash_test.cpp).
//   TIMEWARP_ARCHIVER_CLOCK_FILE=F  archive times are read from file F (nanoseconds since
//       the epoch, in decimal), which the test rewrites to move the clock (the convergence
//       trial with a retention policy over weeks).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <memory>
#include <string_view>
#include <utility>

#include "archiver/program.hpp"

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
  if (const char* clock = std::getenv("TIMEWARP_ARCHIVER_CLOCK_FILE"); clock != nullptr) {
    hooks.now = [file = std::string(clock)] {
      std::ifstream in(file);
      std::int64_t ns = 0;
      in >> ns;
      return ns;
    };
  }
  return tw::archiver::program_main(argc, argv, std::move(hooks));
}
