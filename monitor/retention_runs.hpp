// The monitor's scheduled retention (docs/operations.md, "Retention"): `timewarp forget
// --summary --low-priority`, which removes what the policy no longer keeps and then
// collects, run as a child process of its own at the lowest CPU and I/O priority. A run is
// due retention_interval seconds after the archive's last collection, whoever ran it (an
// operator's `timewarp gc` counts), so a monitor restarted often still runs it; an archive
// never collected has its first run one interval after the monitor starts. Archiving goes on
// beside a run: a collection stops no archiver (archive/FORMAT.md, "Collection"), and a
// run killed at any instant loses nothing, so stopping the monitor ends a run at once.
// Runs never overlap, and a failed one is tried again an interval later.
// The child gets the archive and retention keys as flags and no database credentials
// (background_runs.hpp). Used from the monitor's thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "monitor/background_runs.hpp"

namespace tw::monitor {

class RetentionRuns final : public BackgroundRuns {
 public:
  // `timewarp` is the executable to run (empty: the one beside this program).
  RetentionRuns(std::shared_ptr<Launcher> launcher, std::string timewarp);

  // Starts a run when one is due under `config` (retention_interval 0: never).
  void tick(const Config& config) override;
  std::optional<Clock::time_point> due(const Config& config) const override;
};

}  // namespace tw::monitor
