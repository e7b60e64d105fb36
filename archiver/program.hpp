// timewarp-archiver's whole program: its signals, the command line, logging, the archive,
// then the request loop (read a line, handle it, hold its answer in the group commit).
// main.cpp calls it with no hooks; a test executable (tests/support/hooked_archiver.cpp)
// calls it with ArchiverHooks of its own, so tests run the real program without a test
// switch in it.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace tw::archiver {

// Seams for tests, all empty in timewarp-archiver.
struct ArchiverHooks {
  // Runs before every durable write step of the archive (archive::StoreHooks::
  // before_write_step), on the request thread and on the store's sync thread.
  std::function<void(std::string_view step)> before_write_step;
  // The clock of archive times (archive::StoreHooks::now): tests move it over weeks.
  std::function<std::int64_t()> now;
};

// Returns the process exit code.
int program_main(int argc, char** argv, ArchiverHooks hooks = {});

}  // namespace tw::archiver
