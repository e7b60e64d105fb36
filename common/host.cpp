#include "common/host.hpp"

#include <unistd.h>

namespace tw {

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace tw
