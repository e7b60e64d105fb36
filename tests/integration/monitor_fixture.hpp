// Runs the real timewarp-monitor (which starts the real scheduler) against a test database.
#pragma once

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "support/test_support.hpp"

namespace tw::test {

class MonitorProcess {
 public:
  // `scheduler`: the scheduler executable the monitor starts.
  MonitorProcess(const TestDatabase& db, std::vector<std::string> args,
                 std::vector<std::pair<std::string, std::string>> env = {},
                 const std::string& scheduler = scheduler_exe()) {
    LaunchSpec spec{monitor_exe(), std::move(args), std::move(env)};
    spec.args.push_back("--database=" + db.conninfo());
    spec.args.push_back("--scheduler-exe=" + scheduler);
    // The monitor's retention runs: the tool of this build, wherever the monitor is.
    spec.args.push_back("--timewarp-exe=" + cli_exe());
    process_ = make_process_launcher()->launch(spec);
  }
  ~MonitorProcess() {
    if (process_) stop();
  }
  // SIGTERM, as a service manager would; returns the exit status.
  int stop() {
    ::kill(process_->pid(), SIGTERM);
    auto status = process_->wait_exit(std::chrono::seconds(90));
    if (!status) status = process_->terminate(std::chrono::seconds(1));
    process_.reset();
    return *status;
  }
  pid_t pid() const { return process_->pid(); }

 private:
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace tw::test
