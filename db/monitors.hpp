// The monitors' rows in timewarp.monitors (one per running timewarp-monitor, refreshed by
// its heartbeat) and the operator's run-time settings in timewarp.control
// (`timewarp archivers N`). Not thread-safe: use from the thread that owns the Connection.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "db/connection.hpp"
#include "db/session.hpp"

namespace tw::db {

struct MonitorRegistration {
  std::int64_t id = 0;
  double registered_at = 0;  // the server's clock, seconds since the epoch
};

// Adds a row for a monitor on the machine `host`, queueing for `host_id` (the
// configuration's), watching `escaped_roots`.
MonitorRegistration register_monitor(Connection& conn, const std::string& host,
                                     const std::string& host_id, int pid,
                                     std::span<const std::string> escaped_roots, int archivers);

// Whether the row `id` is still there (a test or an operator may have emptied the table).
bool monitor_registered(Connection& conn, std::int64_t id);

// What a monitor's archive has not shipped to its pack store yet, as the monitor last read
// it (archive::ShipBacklog, plus when and where). Times are seconds since the epoch.
struct ShippingFigures {
  std::string store;  // <endpoint>/<bucket>/<prefix>
  double read_at = 0;
  std::string error;  // the last run's failure, or why the archive could not be read
  std::int64_t packs_pending = 0, bytes_pending = 0, removals_pending = 0;
  std::optional<double> oldest_pending_at, last_shipped_at, catalog_shipped_at;
};

// What a monitor's heartbeat records (the columns of timewarp.monitors).
struct MonitorStats {
  // The watcher's figures: directories watched and polled, events read, changes found,
  // full rescans.
  std::int64_t watches = 0, unwatched = 0, events = 0, changes = 0, rescans = 0;
  std::int64_t items_queued = 0;  // items inserted
  int archivers = 0;              // asked of its scheduler
  std::optional<int> scheduler_pid;
  std::int64_t scheduler_restarts = 0;
  bool catchup_finished = false;  // everything changed while stopped is queued
  bool stopping = false;
  SessionHealth database;
  std::optional<ShippingFigures> shipping;  // none without a pack store (columns left NULL)
};

// Refreshes the row `id` (heartbeat_at = now()).
void monitor_heartbeat(Connection& conn, std::int64_t id, const MonitorStats& stats);

// A run-time setting: its text and when it was set (seconds since the epoch).
struct ControlSetting {
  std::string value;
  double set_at = 0;
};

// The setting `name` ("archivers"), if an operator ever set it.
std::optional<ControlSetting> read_control(Connection& conn, std::string_view name);

// Sets `name` to `value` now; the queue's trigger notifies timewarp_control.
void write_control(Connection& conn, std::string_view name, const std::string& value);

}  // namespace tw::db
