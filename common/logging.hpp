// Logging set-up for every executable: spdlog to stderr (never to the protocol pipes) and,
// when log_file is set, to that file too.
#pragma once

#include <string>

#include "common/config.hpp"

namespace tw {

// Installs the default logger named `program` and logs the program's name and version (at
// info). Call once at the start of main. Returns -1
// when the program should go on, or 2 after printing one line on stderr that names the log
// file and why it cannot be opened (a missing directory is not created).
[[nodiscard]] int setup_logging(const std::string& program, const Config& config);

}  // namespace tw
