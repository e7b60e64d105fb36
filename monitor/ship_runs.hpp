// The monitor's scheduled shipping (docs/operations.md, "Shipping to an object store"):
// `timewarp ship --low-priority`, which copies the archive's sealed packs to the pack store
// the store_* keys name and removes the collected ones from it, run as a child process of
// its own at the lowest CPU and I/O priority, never by an archiver (a version is durable
// on the local disk; COMPLETE waits for nothing on the network). The first run is one
// minute after the monitor starts (or one ship_interval, when shorter), then one every
// ship_interval after each run began, and a last one when the monitor stops (after its
// archivers have exited); none while no store is configured or before the archivers have
// made the archive. A failed run (the store down) is tried again an
// interval later; what it shipped stays shipped. The child gets the archive and store keys
// as flags, the store's access keys in its environment (never as flags, which any user may
// read), and no database credentials. Used from the monitor's thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "monitor/background_runs.hpp"

namespace tw::monitor {

class ShipRuns final : public BackgroundRuns {
 public:
  // `timewarp` is the executable to run (empty: the one beside this program).
  ShipRuns(std::shared_ptr<Launcher> launcher, std::string timewarp);

  // Starts a run when one is due under `config` (no store_endpoint, or ship_interval 0:
  // never).
  void tick(const Config& config) override;
  std::optional<Clock::time_point> due(const Config& config) const override;
  // The monitor is stopping, its archivers have exited (their packs sealed): one last run,
  // waited for up to `limit` (a store that is down does not hold the stop up for longer).
  void final_run(const Config& config, std::chrono::milliseconds limit);

  // Whether a run has ended since the last call, and why it failed ("" when it did not):
  // the monitor then reads the archive's backlog again for the database (shipping_figures.hpp).
  std::optional<std::string> take_ended();

 private:
  void ended(int status, const std::string& last_line) override;

  std::optional<std::string> ended_;
};

}  // namespace tw::monitor
