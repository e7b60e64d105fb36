// timewarp: the operator's tool.
#include <malloc.h>

#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/archive_commands.hpp"
#include "cli/check_command.hpp"
#include "cli/control_commands.hpp"
#include "cli/diff_command.hpp"
#include "cli/help.hpp"
#include "cli/mount_command.hpp"
#include "cli/queue_commands.hpp"
#include "cli/retention_commands.hpp"
#include "cli/ship_command.hpp"
#include "common/config.hpp"
#include "common/logging.hpp"

int main(int argc, char** argv) {
  // Restore, verify and mount decompress blobs of up to 8 MiB into buffers made and freed
  // blob after blob. With glibc's adaptive defaults most came from fresh memory (a new
  // mapping, or heap given back to the kernel and taken again), each page faulted in and
  // zeroed: a restore of 1 GiB spent 2.1 s of system time (0.8-1.0 s with these). The freed
  // memory kept for reuse stays under 64 MiB an arena.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
  tw::Config config;
  CLI::App app{
      "timewarp: the operator's tool of TimeWarp, which keeps every version of every "
      "file:\nthe queue's progress, the archive's versions, restore, verify, retention."};
  app.name("timewarp");
  app.require_subcommand(1);
  tw::add_config_options(app, config);
  std::function<int()> run;
  tw::cli::add_queue_commands(app, config, run);
  tw::add_archive_commands(app, config, run);
  tw::cli::add_check_command(app, config, run);
  tw::cli::add_diff_command(app, config, run);
  tw::add_retention_commands(app, config, run);
  tw::cli::add_ship_command(app, config, run);
  tw::cli::add_control_commands(app, config, run);
  tw::cli::add_mount_command(app, config, run);
  tw::cli::add_help_commands(app, config, run);  // last: it hides the keys and adds examples
  if (const int code = tw::parse_command_line(app, argc, argv, tw::ConfigSearch::Search, &config);
      code >= 0) {
    return code;
  }
  if (config.log_level == "info") config.log_level = "warn";  // quiet unless asked
  if (const int code = tw::setup_logging("timewarp", config); code >= 0) return code;
  try {
    return run ? run() : 2;
  } catch (const std::exception& e) {
    std::cerr << "timewarp: " << e.what() << "\n";
    return 1;
  }
}
