// This machine and this process's place on it: the host name the scheduler and monitor rows
// of the database record, and the priority of background work.
#pragma once

#include <cstddef>
#include <string>

namespace tw {

// gethostname(), or "unknown" when it fails.
std::string hostname();

// The cores this process may run on (its CPU affinity, as `nproc` counts them), at least 1.
std::size_t usable_cores();

// Puts this process at the lowest CPU priority (nice 19) and the lowest best-effort I/O
// priority, for work that may wait (the monitor's scheduled retention runs). Threads
// started afterwards inherit it. Not the idle I/O class: with archivers writing without a
// pause, an idle-class collection could wait forever. Returns what could not be set
// (empty when both were).
std::string lower_priority();

}  // namespace tw
