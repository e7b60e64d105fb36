// The name of this machine, as the scheduler and monitor rows of the database record it.
#pragma once

#include <string>

namespace tw {

// gethostname(), or "unknown" when it fails.
std::string hostname();

}  // namespace tw
