#include "common/host.hpp"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace tw {

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::size_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    return static_cast<std::size_t>(std::max(1, CPU_COUNT(&set)));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string lower_priority() {
  std::string failed;
  if (::setpriority(PRIO_PROCESS, 0, 19) != 0) {
    failed = fmt::format("nice 19: {}", std::strerror(errno));
  }
  // ioprio_set has no glibc wrapper; the values are those of linux/ioprio.h.
  constexpr int kWhoProcess = 1;
  constexpr int kClassBestEffort = 2;
  constexpr int kClassShift = 13;
  constexpr int kLowest = 7;
  if (::syscall(SYS_ioprio_set, kWhoProcess, 0, (kClassBestEffort << kClassShift) | kLowest) != 0) {
    failed += fmt::format("{}I/O priority: {}", failed.empty() ? "" : "; ", std::strerror(errno));
  }
  return failed;
}

}  // namespace tw
