// The monitor's scheduled retention (docs/operations.md, "Retention"): `timewarp forget
// --summary --low-priority`, which removes what the policy no longer keeps and then
// collects, run as a child process of its own at the lowest CPU and I/O priority. A run is
// due retention_interval seconds after the archive's last collection, whoever ran it (an
// operator's `timewarp gc` counts), so a monitor restarted often still runs it; an archive
// never collected has its first run one interval after the monitor starts. Archiving goes on
// beside a run: a collection stops no archiver (archive/FORMAT.md, "Collection"), and a
// run killed at any instant loses nothing, so stopping the monitor ends a run at once.
// Runs never overlap, and a failed one is tried again an interval later.
// The child gets the archive and retention keys as flags and no database credentials.
// Used from the monitor's thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/config.hpp"
#include "common/process.hpp"

namespace tw::monitor {

class RetentionRuns {
 public:
  using Clock = std::chrono::steady_clock;

  // `timewarp` is the executable to run (empty: the one beside this program).
  RetentionRuns(std::shared_ptr<Launcher> launcher, std::string timewarp);
  RetentionRuns(const RetentionRuns&) = delete;
  RetentionRuns& operator=(const RetentionRuns&) = delete;
  ~RetentionRuns();

  // Starts a run when one is due under `config` (retention_interval 0: never).
  void tick(const Config& config);
  // When tick() next has something to do; nothing while a run goes on, when off, or
  // before the first tick().
  std::optional<Clock::time_point> due(const Config& config) const;
  // The running child's output, to poll (-1 when none runs).
  int output_fd() const;
  bool has_buffered_line() const;
  // Logs what the child printed; reaps it when it has finished.
  void on_output();
  // The schedule is worked out again at the next tick() (the interval changed).
  void reschedule() { next_.reset(); }
  // Ends a running child (SIGTERM, then SIGKILL): a run is safe to kill at any instant.
  void stop();

 private:
  void start(const Config& config);
  void finished(int status);

  const std::shared_ptr<Launcher> launcher_;
  const std::string timewarp_;
  const Clock::time_point started_ = Clock::now();
  std::unique_ptr<ChildProcess> child_;
  std::optional<Clock::time_point> next_;  // after a run: one interval later
  std::string last_line_;                  // the child's last output line
};

}  // namespace tw::monitor
