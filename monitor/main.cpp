// timewarp-monitor: the command users launch. Migrates the database, watches the source
// directories, starts and supervises timewarp-scheduler, and wakes it whenever the master
// queue has work.
#include <iostream>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "common/config.hpp"
#include "common/logging.hpp"
#include "common/process.hpp"
#include "db/connection.hpp"
#include "db/migrations.hpp"
#include "monitor/monitor.hpp"

namespace {

constexpr const char* kDescription =
    "timewarp-monitor: watches source folders and keeps every version of every file.";

// Parses the command line (and with it the environment and the config file) into `config`.
int parse(tw::Config& config, int argc, char** argv) {
  CLI::App app{kDescription};
  app.name("timewarp-monitor");
  tw::add_config_options(app, config);
  return tw::parse_command_line(app, argc, argv, tw::ConfigSearch::Search, &config);
}

}  // namespace

int main(int argc, char** argv) {
  tw::monitor::Monitor::block_signals();
  tw::Config config;
  if (const int code = parse(config, argc, argv); code >= 0) return code;
  if (const int code = tw::setup_logging("timewarp-monitor", config); code >= 0) return code;
  try {
    if (config.backup_root.empty()) {
      throw std::runtime_error("backup_root is not set (--backup-root, BACKUP_ROOT or config)");
    }
    tw::Filter::from_config(config);  // refuses overlapping trees before anything runs
    {
      tw::db::Connection conn(config.database);
      const auto applied = tw::db::migrate(conn);
      spdlog::info("database {} ready (schema version {}, {} migrations applied now)",
                   conn.describe(), tw::db::schema_version(conn), applied.size());
    }
    // SIGHUP: the same command line, environment and file, read again.
    const auto reload = [argc, argv]() -> std::optional<tw::Config> {
      tw::Config fresh;
      if (parse(fresh, argc, argv) >= 0) return std::nullopt;  // the reason went to stderr
      return fresh;
    };
    tw::monitor::Monitor monitor(config, tw::make_process_launcher(), reload);
    return monitor.run();
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}
