// The monitor's event loop: turns file changes into queue items, keeps the scheduler awake
// exactly when there is work, and keeps the suite running.
//   - A Watcher thread finds changes (inotify, start-up catch-up, rescans) and hands them to
//     an EventBatcher; this loop inserts each gathered window in one round trip.
//   - The listener connection (LISTEN timewarp_items, timewarp_control) drives the READY
//     handshake (handshake.hpp) for work added by anyone, and wakes the scheduler when the
//     earliest delayed retry falls due.
//   - The scheduler child is restarted with backoff when it dies; SIGTERM/SIGINT send STOP
//     and wait (bounded); SIGHUP re-reads the configuration and passes a changed
//     `archivers` on as ARCHIVERS n, as does `timewarp archivers N` (timewarp.control).
//   - Every retention_interval seconds a retention run (`timewarp forget`, then its
//     collection) goes at low priority beside the archiving (retention_runs.hpp).
//   - With a pack store configured, every ship_interval seconds a shipping run (`timewarp
//     ship`) copies the sealed packs there, at low priority (ship_runs.hpp).
//   - A row in timewarp.monitors shows the monitor, its watches and its catch-up.
// run() is driven by one thread; the watcher has its own.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "common/config.hpp"
#include "common/fd.hpp"
#include "common/filters.hpp"
#include "common/process.hpp"
#include "db/connection.hpp"
#include "db/session.hpp"
#include "monitor/archive_view.hpp"
#include "monitor/event_batcher.hpp"
#include "monitor/event_source.hpp"
#include "monitor/handshake.hpp"
#include "monitor/retention_runs.hpp"
#include "monitor/ship_runs.hpp"
#include "monitor/shipping_figures.hpp"
#include "monitor/watcher.hpp"

namespace tw::monitor {

class Monitor {
 public:
  // Re-reads the configuration (SIGHUP); nothing when it is not valid (already reported).
  using Reload = std::function<std::optional<Config>()>;

  // `source` defaults to inotify.
  Monitor(Config config, std::shared_ptr<Launcher> launcher, Reload reload = {},
          std::unique_ptr<EventSource> source = nullptr);
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;
  ~Monitor();

  // Runs until SIGTERM or SIGINT; returns the exit code. The caller must have blocked
  // SIGTERM, SIGINT and SIGHUP in every thread (block_signals()) before starting threads.
  int run();

  // Blocks the signals the monitor handles through its signalfd.
  static void block_signals();

 private:
  using Clock = std::chrono::steady_clock;

  void start_scheduler();
  void on_scheduler_output();
  // The signals read from the signal fd: SIGHUP reloads; SIGINT or SIGTERM shuts down and
  // gives run()'s exit status.
  std::optional<int> on_signals();
  // What is due after each wake-up (the database, the scheduler's restart, retries, queued
  // changes, the catch-up, heartbeats, notifications); an exit status when the monitor
  // must stop.
  std::optional<int> on_wakeup();
  void on_scheduler_exit(int status);
  void check_queue(bool periodic = false);
  void send(const std::string& line);
  bool ensure_database();
  void on_connect(db::Connection& conn);
  void handle_notifications();
  void stop_scheduler();
  void queue_changes();
  void heartbeat(bool stopping = false);
  void read_control(db::Connection& conn);
  void apply_control();
  void set_archivers(int archivers, const std::string& why);
  void reload();
  void reload_retention(const Config& fresh);
  void reload_shipping(const Config& fresh);
  // Reads the archive's shipping backlog again for the monitor's row (`run_error`: why the
  // last shipping run failed).
  void read_shipping(const std::string& run_error = {});
  void shut_down();
  std::optional<Clock::time_point> next_wakeup() const;

  // Constant after construction.
  const std::shared_ptr<Launcher> launcher_;
  const Reload reload_;
  const Filter filter_;

  Config config_;  // archivers, event_delay and log_level change on reload
  UniqueFd signal_fd_;
  UniqueFd wake_fd_;  // the batcher opened a window, or the catch-up finished
  ArchiveView archive_;
  db::Session session_;  // the listener: LISTEN, the queue, the monitor's row
  EventBatcher batcher_;
  std::unique_ptr<Watcher> watcher_;
  std::unique_ptr<ChildProcess> scheduler_;
  RetentionRuns retention_;
  ShipRuns shipping_;
  std::optional<db::ShippingFigures> shipping_figures_;  // for the heartbeat
  std::string ship_error_;             // why the last shipping run failed ("": it did not)
  Clock::time_point shipping_read_{};  // when shipping_figures_ was read
  Handshake handshake_;
  std::optional<Clock::time_point> retry_due_;   // earliest delayed item
  std::optional<Clock::time_point> restart_at_;  // scheduler restart after a crash
  Clock::time_point next_heartbeat_{};
  std::chrono::milliseconds restart_backoff_{0};
  Clock::time_point scheduler_started_{};
  std::int64_t monitor_id_ = 0;
  std::int64_t items_queued_ = 0;
  std::int64_t scheduler_restarts_ = 0;
  std::optional<double> control_applied_at_;  // epoch seconds of the archivers now in force
  std::optional<int> control_archivers_;      // read from timewarp.control, not yet applied
  bool catchup_recorded_ = false;
  bool recheck_queue_ = false;  // (re)connected: look at the queue once
  bool notes_unread_ = false;   // notifications may wait in libpq's queue
  bool stopping_ = false;
};

// Host `host`'s waiting work in the queue beneath the source directories, looked up on a
// connection of its own (the watcher's thread).
PendingLookup make_pending_lookup(std::string conninfo, std::string host);

}  // namespace tw::monitor
