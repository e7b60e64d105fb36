#include "cli/control_commands.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "common/archivers.hpp"
#include "db/monitors.hpp"
#include "db/status.hpp"

namespace tw::cli {
namespace {

struct ArchiversOptions {
  int archivers = 0;  // 0: show only
  double wait = 10;   // seconds
};

// Schedulers that run and heart-beat (a row left by one that was killed does not count).
std::vector<db::SchedulerInfo> live_schedulers(db::Connection& conn, double heartbeat_interval) {
  return db::running_schedulers(conn, std::max(3 * heartbeat_interval, 15.0));
}

void print(const std::vector<db::SchedulerInfo>& schedulers) {
  for (const auto& s : schedulers) {
    std::cout << fmt::format("scheduler {} on {} (pid {}): {} archivers\n", s.id, s.host, s.pid,
                             s.archivers);
  }
}

int run_archivers(const Config& config, const ArchiversOptions& options) {
  db::Connection conn(config.database);
  if (options.archivers == 0) {
    const auto schedulers = live_schedulers(conn, config.heartbeat_interval);
    print(schedulers);
    if (schedulers.empty()) std::cout << "no scheduler is running\n";
    return 0;
  }
  db::write_control(conn, "archivers", std::to_string(options.archivers));
  std::cout << fmt::format("asked the running monitors for {} archivers\n", options.archivers);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<std::int64_t>(options.wait * 1000));
  while (true) {
    const auto schedulers = live_schedulers(conn, config.heartbeat_interval);
    bool all = !schedulers.empty();
    for (const auto& s : schedulers) all = all && s.archivers == options.archivers;
    if (all || std::chrono::steady_clock::now() >= deadline) {
      print(schedulers);
      if (all) return 0;
      if (options.wait <= 0) return 0;
      std::cerr
          << (schedulers.empty()
                  ? "timewarp archivers: no scheduler is running (is timewarp-monitor running?); "
                    "a monitor started later uses its configuration\n"
                  : fmt::format("timewarp archivers: not every scheduler reports {} archivers "
                                "after {} s\n",
                                options.archivers, options.wait));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

void add_control_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  auto options = std::make_shared<ArchiversOptions>();
  auto* archivers = app.add_subcommand(
      "archivers", "show the archiver pools of the running schedulers, or resize them to N");
  archivers->fallthrough();
  archivers
      ->add_option("N", options->archivers,
                   fmt::format("archivers per scheduler ({}-{})", kMinArchivers, kMaxArchivers))
      ->transform(number_in(kMinArchivers, kMaxArchivers));
  archivers
      ->add_option("--wait", options->wait,
                   "seconds to wait for the schedulers to report N (0: do not wait)")
      ->transform(number_in(0.0, 3600.0))
      ->capture_default_str();
  archivers->callback([&config, &run, options] {
    run = [&config, options] { return run_archivers(config, *options); };
  });
}

}  // namespace tw::cli
