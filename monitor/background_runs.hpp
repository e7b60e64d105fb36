// A `timewarp` subcommand the monitor runs in the background as a child of its own, one
// run at a time, on a schedule: the retention runs (retention_runs.hpp) and the shipping
// runs (ship_runs.hpp). Here: the child's start (the monitor's configuration file, the keys
// it needs as flags, only the environment it needs), its output logged line by line, its
// end, and its stop. Subclasses say when a run is due (tick, due) and what it runs. Every
// such run is safe to kill at any instant, so stopping the monitor ends it at once.
// Used from the monitor's thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/config.hpp"
#include "common/process.hpp"

namespace tw::monitor {

// What a run's libcurl may need of the monitor's environment when it reads or writes the
// pack store: the certificates of an https store, and proxies.
extern const std::vector<std::string> kStoreNetworkEnv;

// The configuration's secret keys (the store's access keys) set, as their environment
// variables: a run gets them there, never as flags (which any user may read).
std::vector<std::pair<std::string, std::string>> secret_env(const Config& config);

class BackgroundRuns {
 public:
  using Clock = std::chrono::steady_clock;

  // `timewarp` is the executable to run (empty: the one beside this program); `name` what
  // the log calls a run ("retention run").
  BackgroundRuns(std::shared_ptr<Launcher> launcher, std::string timewarp, std::string name);
  BackgroundRuns(const BackgroundRuns&) = delete;
  BackgroundRuns& operator=(const BackgroundRuns&) = delete;
  virtual ~BackgroundRuns();

  // What a run is: `timewarp` with these arguments.
  struct Run {
    std::vector<std::string> args;                         // the subcommand and its own flags
    std::span<const std::string_view> keys;                // configuration keys passed as flags
    std::vector<std::pair<std::string, std::string>> env;  // set for the child
  };

  // Starts a run when one is due under `config`.
  virtual void tick(const Config& config) = 0;
  // When tick() next has something to do; nothing while a run goes on, when off, or
  // before the first tick().
  virtual std::optional<Clock::time_point> due(const Config& config) const = 0;

  // The running child's output, to poll (-1 when none runs).
  int output_fd() const;
  bool has_buffered_line() const;
  // Logs what the child printed; reaps it when it has finished.
  void on_output();
  // The schedule is worked out again at the next tick() (the interval changed).
  void reschedule() { next_.reset(); }
  // Ends a running child (SIGTERM, then SIGKILL).
  void stop();

 protected:
  // Starts `timewarp` with `run`. The child inherits only PATH, TZ, the locale, HOME and
  // TMPDIR of the monitor's environment, plus `extra_env` (names or prefixes with '*').
  void start(const Config& config, const Run& run, const std::vector<std::string>& extra_env = {});
  // Starts `run` (a running one is stopped first) and waits up to `limit` for it to end,
  // logging its output; one still going then is stopped. True when it ended by itself
  // (ended() was called), false when it could not start or was stopped.
  bool run_now(const Config& config, const Run& run, const std::vector<std::string>& extra_env,
               std::chrono::milliseconds limit);
  bool running() const { return child_ != nullptr; }
  // A run has ended by itself with `status` (its exit status), `last_line` the last line it
  // printed.
  virtual void ended(int /*status*/, const std::string& /*last_line*/) {}

  const Clock::time_point started_ = Clock::now();
  std::optional<Clock::time_point> next_;  // after a run: one interval later

 private:
  void finished(int status);

  const std::shared_ptr<Launcher> launcher_;
  const std::string timewarp_;
  const std::string name_;
  std::unique_ptr<ChildProcess> child_;
  std::string last_line_;  // the child's last output line
};

}  // namespace tw::monitor
