#include "scheduler/program.hpp"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <exception>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "common/config.hpp"
#include "common/logging.hpp"
#include "common/process.hpp"

namespace tw::scheduler {

int program_main(int argc, char** argv, SchedulerHooks hooks) {
  // The monitor decides when the scheduler stops (STOP or EOF on stdin): a Ctrl-C or a
  // hang-up reaching the whole process group must not cut a drain short.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  // SIGTERM stops gracefully, like STOP: it is read from a signalfd by the main loop.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  Config config;
  CLI::App app{
      "timewarp-scheduler: claims queued changes and feeds them to archivers.\n"
      "Reads READY, STOP and ARCHIVERS n on stdin; writes READY when drained."};
  app.name("timewarp-scheduler");
  add_config_options(app, config);
  if (const int code = parse_command_line(app, argc, argv); code >= 0) return code;
  if (const int code = setup_logging("timewarp-scheduler", config); code >= 0) return code;
  try {
    if (config.backup_root.empty() && config.archiver_args.empty()) {
      throw std::runtime_error("backup_root is not set (--backup-root, BACKUP_ROOT or config)");
    }
    Scheduler scheduler(config, make_process_launcher(), STDIN_FILENO, STDOUT_FILENO,
                        std::move(hooks));
    return scheduler.run();
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}

}  // namespace tw::scheduler
