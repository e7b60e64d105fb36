// The processes of one convergence run and the blows the fault injector deals them: the
// real timewarp-monitor (which starts the real scheduler and its archivers, behind the
// fault-injecting proxy when the retry fault is on) on a per-run database, restarted with
// the same arguments when it is killed, as systemd would; a second timewarp-scheduler on the
// same database with a short lease, stopped while it holds items and killed once its lease
// expired; SIGKILL of an archiver or of the scheduler (found through /proc); a restart of
// the PostgreSQL server. It also answers the quiet-moment question: is the queue drained
// and has the running monitor finished its start-up catch-up?
// Every process it starts is ended by stop() or the destructor, stragglers included (found
// by the run's directory on their command line). Used from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "common/process.hpp"
#include "db/connection.hpp"
#include "integration/convergence_log.hpp"

namespace tw::test::convergence {

// The fault-injecting archiver proxy (TIMEWARP_TEST_FAULT_ARCHIVER_EXE overrides the built one).
std::string fault_archiver_path();
// The archiver with test hooks (TIMEWARP_TEST_HOOKED_ARCHIVER_EXE overrides the built one).
std::string hooked_archiver_path();

// The running (not zombie) children of `parent`, from /proc.
std::vector<pid_t> running_children(pid_t parent);
// Whether `pid` is a process that has not exited (a zombie has).
bool running(pid_t pid);

struct SystemSettings {
  std::string work;      // the run's directory: src/, archive/, logs
  std::string conninfo;  // the run's own database
  int archivers = 2;
  double event_delay = 0.1;
  double lease_time = 3;           // the monitor's scheduler
  double second_lease_time = 1.5;  // the second scheduler
  bool proxy = false;              // archivers behind timewarp-fault-archiver
  std::uint64_t seed = 1;
  int retry_permille = 0;
  // Archivers are timewarp-hooked-archiver with these arguments (the trial's clock), and the
  // monitor runs no retention of its own (it would read the real clock).
  std::vector<std::string> hooked_archiver_args;
  // More monitor arguments: the pack store and its shipping runs (the bucket variant).
  std::vector<std::string> store_args;
};

class System {
 public:
  System(SystemSettings settings, EventLog& log);
  System(const System&) = delete;
  System& operator=(const System&) = delete;
  ~System();

  std::string src() const { return settings_.work + "/src"; }
  std::string archive() const { return settings_.work + "/archive"; }
  std::string monitor_log() const { return settings_.work + "/monitor.log"; }
  std::string proxy_log() const { return settings_.work + "/proxy.log"; }

  void start_monitor();
  // SIGKILL, reaped, then started again with the same arguments.
  void kill_monitor();
  // Restarts a monitor that exited by itself (a service manager would); false if it had.
  bool supervise();
  // SIGKILL of the monitor's scheduler (the monitor restarts it). False if none ran.
  bool kill_scheduler();
  // SIGKILL of one of the scheduler's archivers (the proxy or the real one behind it).
  bool kill_archiver(std::mt19937_64& rng);
  // pg_ctl restart of the server in TW_PG_DATADIR; false (and logged) when it failed.
  bool restart_database();

  // Starts the second scheduler, sends READY until it holds items, then SIGSTOPs it; when
  // it never holds any within a few seconds it is stopped cleanly. False in that case.
  bool start_second_scheduler();
  // Once the stopped second scheduler's leases have expired: SIGKILL and reap.
  void tick_second_scheduler();
  bool second_scheduler_running() const { return second_ != nullptr; }

  struct QueueState {
    bool known = false;     // false while the database cannot be asked
    std::int64_t open = 0;  // NEW or DISPATCHED
    std::int64_t failed = 0;
    // The running monitor's start-up catch-up finished, and it has written a heartbeat
    // since the server last started (it reconnected: nothing of its is held back).
    bool catchup_done = false;
  };
  QueueState queue_state();
  // The open and FAILED items, one per line (for a report).
  std::string describe_queue();
  // The newest item's id (0 when none, nothing when the database cannot be asked).
  std::optional<std::int64_t> last_item_id();
  // The items queued after `id`, one per line (for a report).
  std::string describe_items_after(std::int64_t id);

  // The monitor stopped with SIGTERM (its orderly STOP), the second scheduler killed, and
  // every process left from the run ended. Returns the monitor's exit status.
  int stop();

 private:
  std::vector<std::string> monitor_args() const;
  std::unique_ptr<ChildProcess> launch_logged(
      const std::string& exe, const std::vector<std::string>& args, const std::string& log_file,
      std::vector<std::pair<std::string, std::string>> env = {});
  db::Connection* connection();
  std::optional<std::int64_t> scalar(const std::string& sql,
                                     const std::vector<std::string>& params);
  void end_stragglers();

  const SystemSettings settings_;
  EventLog& log_;
  std::shared_ptr<Launcher> launcher_;
  std::unique_ptr<ChildProcess> monitor_;
  std::unique_ptr<ChildProcess> second_;
  std::int64_t second_id_ = 0;  // its row in timewarp.schedulers
  std::unique_ptr<db::Connection> conn_;
  int monitor_starts_ = 0;
};

}  // namespace tw::test::convergence
