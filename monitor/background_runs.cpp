#include "monitor/background_runs.hpp"

#include <poll.h>

#include <spdlog/spdlog.h>

namespace tw::monitor {

const std::vector<std::string> kStoreNetworkEnv = {
    "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "https_proxy", "HTTPS_PROXY",
    "http_proxy",    "HTTP_PROXY",   "no_proxy",       "NO_PROXY"};

std::vector<std::pair<std::string, std::string>> secret_env(const Config& config) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const ConfigKey& key : config_keys()) {
    if (!key.secret) continue;
    if (const std::string value = key_value(key, config); !value.empty()) {
      env.emplace_back(env_name(key), value);
    }
  }
  return env;
}

BackgroundRuns::BackgroundRuns(std::shared_ptr<Launcher> launcher, std::string timewarp,
                               std::string name)
    : launcher_(std::move(launcher)),
      timewarp_(timewarp.empty() ? sibling_executable("timewarp") : std::move(timewarp)),
      name_(std::move(name)) {}

BackgroundRuns::~BackgroundRuns() { stop(); }

void BackgroundRuns::start(const Config& config, const Run& run,
                           const std::vector<std::string>& extra_env) {
  LaunchSpec spec;
  spec.executable = timewarp_;
  spec.args = run.args;
  const auto keys = config_to_args(config, run.keys);
  spec.args.insert(spec.args.end(), keys.begin(), keys.end());
  // The monitor's own file, or none: never one the child would find on its own.
  spec.args.push_back(config.config_file.empty() ? "--no-config"
                                                 : "--config=" + config.config_file);
  // No database credentials: a run reads the archive (and the store) only.
  std::vector<std::string> inherit = {"PATH", "TZ", "LANG", "LC_*", "HOME", "TMPDIR"};
  inherit.insert(inherit.end(), extra_env.begin(), extra_env.end());
  spec.inherit_env = std::move(inherit);
  spec.env = run.env;
  spec.stderr_to_stdout = true;  // its messages are logged, the last one kept for a failure
  try {
    child_ = launcher_->launch(spec);
  } catch (const std::exception& e) {
    spdlog::error("{}: {}; trying again in an interval", name_, e.what());
    return;
  }
  last_line_.clear();
  spdlog::info("{} started (timewarp {}, pid {})", name_, run.args.front(), child_->pid());
}

bool BackgroundRuns::run_now(const Config& config, const Run& run,
                             const std::vector<std::string>& extra_env,
                             std::chrono::milliseconds limit) {
  stop();
  start(config, run, extra_env);
  if (!child_) return false;  // it could not start (logged)
  const auto deadline = Clock::now() + limit;
  while (child_) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      spdlog::warn("{} still going after {} s: stopped", name_,
                   std::chrono::duration_cast<std::chrono::seconds>(limit).count());
      stop();
      return false;
    }
    if (!child_->has_buffered_line()) {
      pollfd fd{child_->stdout_fd(), POLLIN, 0};
      ::poll(&fd, 1, static_cast<int>(left.count()));
    }
    on_output();
  }
  return true;
}

int BackgroundRuns::output_fd() const { return child_ ? child_->stdout_fd() : -1; }

bool BackgroundRuns::has_buffered_line() const { return child_ && child_->has_buffered_line(); }

void BackgroundRuns::on_output() {
  if (!child_) return;
  // A line over 1 MiB (read_line discards it) is not logged.
  const auto exited = drain_lines(*child_, [this](std::optional<std::string> line) {
    if (!line) return;
    spdlog::info("{}: {}", name_, *line);
    last_line_ = std::move(*line);
  });
  if (exited) finished(*exited);
}

void BackgroundRuns::finished(int status) {
  if (status == 0) {
    spdlog::info("{} finished", name_);
  } else {
    spdlog::error("{} failed (exit status {}{}); trying again in an interval", name_, status,
                  last_line_.empty() ? "" : ": " + last_line_);
  }
  child_.reset();
  ended(status, last_line_);
}

void BackgroundRuns::stop() {
  if (!child_) return;
  spdlog::info("stopping the {} (pid {})", name_, child_->pid());
  child_->terminate(std::chrono::seconds(2));
  child_.reset();
}

}  // namespace tw::monitor
