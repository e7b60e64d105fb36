// The processes of this machine as /proc shows them, for tests that look at the real
// children the monitor and the scheduler start (to kill one, or to read its environment).
// Plain functions, safe from any thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tw::test {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';  // 'Z' for a zombie
  std::string comm;  // at most 15 bytes: "timewarp-archiv"
};

// Every process, from /proc/<pid>/stat (zombies included).
std::vector<ProcessEntry> processes();

// The children of `parent` that are not zombies, whose comm starts with `comm_prefix`.
std::vector<ProcessEntry> live_children(pid_t parent, const std::string& comm_prefix = "");

// The environment of process `pid` (NAME=value entries), from /proc/<pid>/environ; empty
// when it cannot be read.
std::vector<std::string> environment_of(pid_t pid);

}  // namespace tw::test
