// Writes the consumers' results to the database in batches, from its own thread and
// connection, and beats the scheduler's heartbeat (renewing the leases of the items the
// scheduler holds, refreshing its row in timewarp.schedulers, recovering other
// schedulers' expired leases). Results survive a database outage, or a statement the
// server refuses: they stay in memory, the reporter's db::Session tries again with a
// growing delay and they are written when the database takes them again; the
// statements only touch items this scheduler still holds, so nothing is marked twice.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.hpp"
#include "common/thread_annotations.hpp"
#include "db/queue.hpp"
#include "db/session.hpp"

namespace tw::scheduler {

class Reporter {
 public:
  struct Options {
    std::string conninfo;
    std::string host;  // the queue's host (Config::host_id)
    std::int64_t scheduler_id = 0;
    std::chrono::milliseconds flush_interval{50};
    std::chrono::milliseconds heartbeat_interval{5000};
    double lease_seconds = 60;
    db::RetryPolicy retry;
    std::int64_t backlog_warning = 100000;  // claimable items that make a growing backlog loud
    double prune_age = 7 * 86400.0;         // COMPLETED items older than this are removed
    std::chrono::milliseconds prune_interval{600000};  // 0: never
  };
  // Figures the scheduler knows and the reporter does not (consumers, batch queue).
  using StatsSource = std::function<db::SchedulerStats()>;

  Reporter(Options options, StatsSource stats);
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;
  ~Reporter();

  void start();

  // The scheduler now holds these claimed items (their leases are renewed until written).
  void hold(const std::vector<db::ClaimedItem>& items) EXCLUDES(mutex_);
  // Items given back unstarted (released to NEW by the caller).
  void unhold(const std::vector<std::int64_t>& ids) EXCLUDES(mutex_);

  void add(db::Completion completion) EXCLUDES(mutex_);
  void add(db::Failure failure) EXCLUDES(mutex_);

  // Waits until every result added before the call is written. False on timeout.
  bool flush(std::chrono::milliseconds timeout) EXCLUDES(mutex_);

  // Writes what it can within `timeout`, marks the scheduler stopped, ends the thread.
  void stop(std::chrono::milliseconds timeout) EXCLUDES(mutex_);

  std::int64_t items_done() const EXCLUDES(mutex_);
  std::int64_t items_failed() const EXCLUDES(mutex_);
  std::size_t pending() const EXCLUDES(mutex_);

 private:
  void run() EXCLUDES(mutex_);
  bool write_pending() EXCLUDES(mutex_);
  void beat() EXCLUDES(mutex_);
  void watch_backlog(db::Queue& queue);
  void prune();
  void note_written(const std::vector<std::int64_t>& ids) REQUIRES(mutex_);
  // Whether run() stops waiting before its next beat: stopping (and able to write, or
  // nothing left to write), or able to write with a full batch or a failure waiting.
  bool write_now(bool can_write) const REQUIRES(mutex_);

  // Constant after construction.
  const Options options_;
  const StatsSource stats_;

  // Only the reporter thread touches these.
  db::Session session_;
  std::chrono::steady_clock::time_point next_beat_{};
  std::int64_t last_backlog_ = 0;
  std::chrono::steady_clock::time_point next_prune_{};
  std::chrono::steady_clock::time_point next_backlog_warning_{};

  // Protected by mutex_.
  mutable Mutex mutex_;
  CondVar cv_;  // results added or written, a flush asked for, stop()
  std::vector<db::Completion> completions_ GUARDED_BY(mutex_);
  std::vector<db::Failure> failures_ GUARDED_BY(mutex_);
  std::uint64_t added_ GUARDED_BY(mutex_) = 0;                              // results ever added
  std::uint64_t written_ GUARDED_BY(mutex_) = 0;                            // results ever written
  std::unordered_map<std::int64_t, std::int64_t> held_ GUARDED_BY(mutex_);  // item -> batch
  std::unordered_map<std::int64_t, std::int64_t> batch_left_ GUARDED_BY(mutex_);
  std::vector<std::int64_t> drained_batches_ GUARDED_BY(mutex_);
  std::int64_t done_ GUARDED_BY(mutex_) = 0;
  std::int64_t failed_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::chrono::steady_clock::time_point stop_deadline_ GUARDED_BY(mutex_){};

  // The reporter's thread: started by start(), joined by stop().
  std::thread thread_;
};

}  // namespace tw::scheduler
