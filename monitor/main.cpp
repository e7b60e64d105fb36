// timewarp-monitor: the command users launch. Migrates the database, starts and supervises
// timewarp-scheduler, and wakes it whenever the master queue has work.
#include <iostream>

#include <spdlog/spdlog.h>

#include "common/config.hpp"
#include "common/logging.hpp"
#include "common/process.hpp"
#include "db/connection.hpp"
#include "db/migrations.hpp"
#include "monitor/monitor.hpp"

int main(int argc, char** argv) {
  tw::monitor::Monitor::block_signals();
  tw::Config config;
  CLI::App app{"timewarp-monitor: watches source folders and keeps every version of every file."};
  app.name("timewarp-monitor");
  tw::add_config_options(app, config);
  if (const int code = tw::parse_command_line(app, argc, argv); code >= 0) return code;
  tw::setup_logging("timewarp-monitor", config);
  try {
    if (config.backup_root.empty()) {
      throw std::runtime_error("backup_root is not set (--backup-root, BACKUP_ROOT or config)");
    }
    {
      tw::db::Connection conn(config.database);
      const auto applied = tw::db::migrate(conn);
      spdlog::info("database {} ready (schema version {}, {} migrations applied now)",
                   conn.describe(), tw::db::schema_version(conn), applied.size());
    }
    tw::monitor::Monitor monitor(config, tw::make_process_launcher());
    return monitor.run();
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}
