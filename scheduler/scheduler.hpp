// The scheduler's main loop (ARCHITECTURE.md, "The handshake"): reads READY,
// STOP and ARCHIVERS n from its signal pipe; on READY claims NEW items in batches into the
// batch queue (refilling it before it runs dry) while consumer threads feed them to their
// archivers; writes READY once nothing is claimable, the batch queue is drained, every
// consumer is idle and every result is written. STOP (or EOF) returns unstarted items to
// NEW, lets each consumer finish its item, flushes results, stops the archivers.
// A Scheduler is driven by the one thread that calls run().
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/fd.hpp"
#include "common/line_buffer.hpp"
#include "common/mutex.hpp"
#include "common/process.hpp"
#include "common/thread_annotations.hpp"
#include "db/queue.hpp"
#include "db/session.hpp"
#include "scheduler/batch_queue.hpp"
#include "scheduler/consumer.hpp"
#include "scheduler/reporter.hpp"

namespace tw::scheduler {

// Seams for tests, all empty in timewarp-scheduler; tests/support/hooked_scheduler.cpp
// fills them. Each runs on the scheduler's main thread.
struct SchedulerHooks {
  // Before each READY, between the scheduler's last look at the queue and the write of
  // READY: a test adds work in the window where a wake-up could be lost.
  std::function<void()> before_ready;
};

class Scheduler {
 public:
  // The longest signal line read; a longer one is ignored whole, with a warning.
  static constexpr std::size_t kMaxSignalLine = 4096;

  Scheduler(Config config, std::shared_ptr<Launcher> launcher, int signal_fd, int ready_fd,
            SchedulerHooks hooks = {});
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  ~Scheduler();

  // Runs until STOP, EOF or SIGTERM (which the caller must have blocked in every thread);
  // returns the process exit code. Throws db::DbError when the database cannot be reached
  // at start.
  int run();

 private:
  enum class Signal { Ready, Stop, Archivers };
  struct SignalLine {
    Signal signal;
    int archivers = 0;
  };

  bool drain();  // false when told to stop
  bool handle_pending_signals(bool draining);
  void wait_for_event(std::chrono::milliseconds timeout);
  void read_signals();
  bool send_ready();
  void resize(int archivers);
  LaunchSpec archiver_spec() const;
  // Starts the first archivers before the scheduler registers (an archiver takes tens of
  // milliseconds to become ready, more on a new archive); resize() hands them out.
  void start_archivers_early(int archivers);
  void reap_finished_consumers();
  void stop();
  db::SchedulerStats stats() const;
  void publish_stats() EXCLUDES(stats_mutex_);
  // Wakes the main thread (any thread may call it).
  void wake();
  // Runs `fn(db::Queue&)` as `operation` through the session; nothing when it did not run.
  template <class Fn>
  auto with_queue(std::string_view operation, Fn&& fn) {
    return session_.run(operation, [&](db::Connection& conn) {
      db::Queue queue(conn, host_id(config_));
      return fn(queue);
    });
  }

  // Constant after construction.
  const Config config_;
  const std::shared_ptr<Launcher> launcher_;
  const int signal_fd_;
  const int ready_fd_;
  const SchedulerHooks hooks_;
  const db::Strategy strategy_;
  UniqueFd wake_fd_;     // eventfd the consumers poke
  UniqueFd sigterm_fd_;  // SIGTERM, blocked by program_main() before any thread starts
  const std::shared_ptr<Pacer> pacer_;

  // Main thread only.
  db::Session session_;
  std::int64_t scheduler_id_ = 0;
  LineBuffer signal_lines_{kMaxSignalLine};
  std::deque<SignalLine> signals_;
  bool input_closed_ = false;
  bool stop_requested_ = false;
  int next_consumer_index_ = 0;
  int wanted_archivers_ = 0;
  std::vector<std::unique_ptr<Consumer>> consumers_;
  std::vector<std::unique_ptr<ChildProcess>> early_archivers_;

  // Shared with the consumer threads; thread-safe themselves.
  BatchQueue batch_queue_;
  std::unique_ptr<Reporter> reporter_;  // set in run(), before any consumer starts
  BusyGauge busy_gauge_;

  // Protected by stats_mutex_: written by the main thread, read by the reporter's.
  Mutex stats_mutex_;
  db::SchedulerStats published_stats_ GUARDED_BY(stats_mutex_);
};

}  // namespace tw::scheduler
