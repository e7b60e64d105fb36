// The monitor's event loop: keeps the master queue's listener connection (LISTEN
// timewarp_items), supervises the scheduler child (restart with backoff when it dies),
// runs the READY handshake, wakes the scheduler when the earliest delayed retry falls due,
// and on SIGTERM/SIGINT sends STOP and waits (bounded) for the scheduler to exit.
// Driven by the one thread that calls run().
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "common/config.hpp"
#include "common/fd.hpp"
#include "common/process.hpp"
#include "db/connection.hpp"
#include "monitor/handshake.hpp"

namespace tw::monitor {

class Monitor {
 public:
  Monitor(Config config, std::shared_ptr<Launcher> launcher);
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
  void on_scheduler_exit(int status);
  void check_queue();
  void send(const std::string& line);
  bool ensure_database();
  void stop_scheduler();
  std::optional<Clock::time_point> next_wakeup() const;

  // Constant after construction.
  const Config config_;
  const std::shared_ptr<Launcher> launcher_;

  UniqueFd signal_fd_;
  std::unique_ptr<db::Connection> conn_;
  std::unique_ptr<ChildProcess> scheduler_;
  Handshake handshake_;
  std::optional<Clock::time_point> retry_due_;       // earliest delayed item
  std::optional<Clock::time_point> restart_at_;      // scheduler restart after a crash
  std::optional<Clock::time_point> reconnect_at_;    // database reconnect
  std::chrono::milliseconds restart_backoff_{0};
  std::chrono::milliseconds db_backoff_{100};
  Clock::time_point scheduler_started_{};
  bool stopping_ = false;
};

}  // namespace tw::monitor
