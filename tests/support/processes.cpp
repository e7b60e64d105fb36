#include "support/processes.hpp"

#include <dirent.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

namespace tw::test {

std::vector<ProcessEntry> processes() {
  std::vector<ProcessEntry> out;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc"), ::closedir);
  while (dir) {
    const dirent* d = ::readdir(dir.get());
    if (!d) break;
    const std::string name = d->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const auto open = stat.find('(');
    const auto close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 4 > stat.size())
      continue;
    ProcessEntry p;
    p.pid = static_cast<pid_t>(std::stol(name));
    p.comm = stat.substr(open + 1, close - open - 1);
    std::istringstream rest(stat.substr(close + 2));
    rest >> p.state >> p.ppid;
    out.push_back(p);
  }
  return out;
}

std::vector<ProcessEntry> live_children(pid_t parent, const std::string& comm_prefix) {
  std::vector<ProcessEntry> out;
  for (const auto& p : processes()) {
    if (p.ppid == parent && p.state != 'Z' && p.comm.rfind(comm_prefix, 0) == 0) out.push_back(p);
  }
  return out;
}

std::vector<std::string> environment_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/environ", pid), std::ios::binary);
  std::vector<std::string> out;
  std::string entry;
  while (std::getline(in, entry, '\0')) out.push_back(entry);
  return out;
}

}  // namespace tw::test
