#include "scheduler/reporter.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "db/housekeeping.hpp"

namespace tw::scheduler {
namespace {
constexpr std::size_t kWriteBatch = 2000;
constexpr auto kMaxBackoff = std::chrono::milliseconds(5000);
constexpr std::string_view kWriting = "writing results";
}  // namespace

Reporter::Reporter(Options options, StatsSource stats)
    : options_(std::move(options)),
      stats_(std::move(stats)),
      session_(db::Session::Options::of(options_.conninfo, "reporter", kMaxBackoff)) {}

Reporter::~Reporter() {
  if (thread_.joinable()) stop(std::chrono::seconds(5));
}

void Reporter::start() {
  thread_ = std::thread([this] { run(); });
}

void Reporter::hold(const std::vector<db::ClaimedItem>& items) {
  MutexLock lock(&mutex_);
  for (const auto& item : items) {
    held_.emplace(item.id, item.batch_id);
    ++batch_left_[item.batch_id];
    for (const auto follower : item.followers) {
      held_.emplace(follower, item.batch_id);
      ++batch_left_[item.batch_id];
    }
  }
}

void Reporter::unhold(const std::vector<std::int64_t>& ids) {
  MutexLock lock(&mutex_);
  note_written(ids);
}

void Reporter::note_written(const std::vector<std::int64_t>& ids) {
  for (const auto id : ids) {
    const auto it = held_.find(id);
    if (it == held_.end()) continue;
    const auto batch = batch_left_.find(it->second);
    if (batch != batch_left_.end() && --batch->second == 0) {
      drained_batches_.push_back(batch->first);
      batch_left_.erase(batch);
    }
    held_.erase(it);
  }
}

void Reporter::add(db::Completion completion) {
  MutexLock lock(&mutex_);
  completions_.push_back(std::move(completion));
  ++added_;
  if (completions_.size() + failures_.size() >= kWriteBatch) cv_.SignalAll();
}

void Reporter::add(db::Failure failure) {
  MutexLock lock(&mutex_);
  failures_.push_back(std::move(failure));
  ++added_;
  cv_.SignalAll();
}

bool Reporter::flush(std::chrono::milliseconds timeout) {
  MutexLock lock(&mutex_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto target = added_;
  cv_.SignalAll();
  while (written_ < target) {
    if (!cv_.WaitUntil(&mutex_, deadline)) return written_ >= target;
  }
  return true;
}

void Reporter::stop(std::chrono::milliseconds timeout) {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + timeout;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

std::int64_t Reporter::items_done() const {
  MutexLock lock(&mutex_);
  return done_;
}

std::int64_t Reporter::items_failed() const {
  MutexLock lock(&mutex_);
  return failed_;
}

std::size_t Reporter::pending() const {
  MutexLock lock(&mutex_);
  return completions_.size() + failures_.size();
}

bool Reporter::write_now(bool can_write) const {
  return (stopping_ && (can_write || (completions_.empty() && failures_.empty()))) ||
         (can_write && (completions_.size() + failures_.size() >= kWriteBatch ||
                        (!failures_.empty() && written_ < added_)));
}

// Writes up to kWriteBatch results. Returns false when the database could not be reached
// (the results stay queued).
bool Reporter::write_pending() {
  std::vector<db::Completion> completions;
  std::vector<db::Failure> failures;
  {
    MutexLock lock(&mutex_);
    const std::size_t nc = std::min(completions_.size(), kWriteBatch);
    completions.assign(completions_.begin(),
                       completions_.begin() + static_cast<std::ptrdiff_t>(nc));
    const std::size_t nf = std::min(failures_.size(), kWriteBatch);
    failures.assign(failures_.begin(), failures_.begin() + static_cast<std::ptrdiff_t>(nf));
  }
  if (completions.empty() && failures.empty()) return true;
  std::int64_t completed = 0;
  db::FailOutcome failed;
  // The statements only touch items we still hold: after a lost connection, running them
  // again changes nothing twice.
  const auto written = session_.run(kWriting, [&](db::Connection& conn) {
    db::Queue queue(conn, options_.host);
    completed = queue.complete(options_.scheduler_id, completions);
    failed = queue.fail(options_.scheduler_id, failures, options_.retry);
  });
  if (!written) return false;
  const auto lost = static_cast<std::int64_t>(completions.size()) - completed +
                    static_cast<std::int64_t>(failures.size()) - failed.retried - failed.failed;
  if (lost > 0) {
    spdlog::warn(
        "{} results were not recorded: this scheduler no longer holds those items "
        "(lease expired); they will run again",
        lost);
  }
  std::vector<std::int64_t> ids;
  for (const auto& c : completions) ids.push_back(c.id);
  for (const auto& f : failures) ids.push_back(f.id);
  MutexLock lock(&mutex_);
  completions_.erase(completions_.begin(),
                     completions_.begin() + static_cast<std::ptrdiff_t>(completions.size()));
  failures_.erase(failures_.begin(),
                  failures_.begin() + static_cast<std::ptrdiff_t>(failures.size()));
  written_ += completions.size() + failures.size();
  done_ += completed;
  failed_ += failed.failed;
  note_written(ids);
  cv_.SignalAll();
  return true;
}

void Reporter::beat() {
  std::vector<std::int64_t> held, drained;
  {
    MutexLock lock(&mutex_);
    held.reserve(held_.size());
    for (const auto& [id, batch] : held_) held.push_back(id);
    drained.swap(drained_batches_);
  }
  db::SchedulerStats stats = stats_ ? stats_() : db::SchedulerStats{};
  {
    MutexLock lock(&mutex_);
    stats.items_done = done_;
    stats.items_failed = failed_;
  }
  stats.database = db::combined(stats.database, session_.health());
  const auto beaten = session_.run("heartbeat", [&](db::Connection& conn) {
    db::Queue queue(conn, options_.host);
    queue.heartbeat(options_.scheduler_id, stats, options_.lease_seconds, held);
    queue.mark_batches_drained(drained);
    const auto recovered = queue.recover_expired_leases(options_.retry.max_attempts);
    if (recovered > 0) spdlog::warn("recovered {} items whose lease had expired", recovered);
    watch_backlog(queue);
  });
  if (!beaten) {
    MutexLock lock(&mutex_);
    drained_batches_.insert(drained_batches_.end(), drained.begin(), drained.end());
  }
}

// Logs a warning (at most once a minute) while the claimable backlog is past the
// threshold and still growing.
void Reporter::watch_backlog(db::Queue& queue) {
  if (options_.backlog_warning <= 0) return;
  const auto backlog = queue.count_claimable(options_.backlog_warning * 10);
  const auto now = std::chrono::steady_clock::now();
  if (backlog > options_.backlog_warning && backlog > last_backlog_ &&
      now >= next_backlog_warning_) {
    spdlog::warn(
        "backlog growing: {}{} claimable items (warning threshold {}); consider more "
        "archivers or a larger batch_size",
        backlog >= options_.backlog_warning * 10 ? "at least " : "", backlog,
        options_.backlog_warning);
    next_backlog_warning_ = now + std::chrono::minutes(1);
  }
  last_backlog_ = backlog;
}

// Removes old COMPLETED items in small batches, a bounded amount per pass so results are
// never held up for long; a pass that found more to do comes back at the next beat.
void Reporter::prune() {
  if (options_.prune_interval.count() <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_prune_) return;
  constexpr int kRows = 1000;
  constexpr int kBatches = 20;
  const auto removed = session_.run("pruning", [&](db::Connection& conn) {
    const auto n = db::prune_completed(conn, options_.prune_age, kRows, kBatches);
    db::prune_audit(conn, options_.prune_age, kRows);
    return n;
  });
  if (removed && *removed > 0) {
    spdlog::info("pruned {} completed items older than {} s", *removed, options_.prune_age);
  }
  next_prune_ = removed && *removed >= kRows * kBatches ? now : now + options_.prune_interval;
}

void Reporter::run() {
  next_beat_ = std::chrono::steady_clock::now();
  // Spread the first prune pass of several schedulers started together.
  next_prune_ = next_beat_ + std::min(options_.prune_interval, std::chrono::milliseconds(30000));
  while (true) {
    {
      MutexLock lock(&mutex_);
      // While results wait for the database, the next look is when the session allows one
      // (a full batch of results waiting must not make this loop spin meanwhile).
      const auto write_at = session_.ready_at(kWriting);
      const bool can_write = write_at <= std::chrono::steady_clock::now();
      auto wake =
          std::min(next_beat_,
                   std::max(std::chrono::steady_clock::now() + options_.flush_interval, write_at));
      if (stopping_) wake = std::min(wake, stop_deadline_);
      while (!write_now(can_write)) {
        if (!cv_.WaitUntil(&mutex_, wake)) break;
      }
      if (stopping_) {
        const bool empty = completions_.empty() && failures_.empty();
        if (empty || std::chrono::steady_clock::now() >= stop_deadline_) break;
      }
    }
    while (true) {
      const bool ok = write_pending();
      MutexLock lock(&mutex_);
      if (!ok || (completions_.size() + failures_.size() < kWriteBatch)) {
        if (ok && !(completions_.empty() && failures_.empty())) continue;
        break;
      }
    }
    if (std::chrono::steady_clock::now() >= next_beat_) {
      beat();
      prune();
      next_beat_ = std::chrono::steady_clock::now() + options_.heartbeat_interval;
    }
  }
  // Final: mark the scheduler stopped (best effort).
  std::size_t left = 0;
  {
    MutexLock lock(&mutex_);
    left = completions_.size() + failures_.size();
  }
  if (left > 0) {
    spdlog::error(
        "stopping with {} results unwritten (the database is unreachable or refuses "
        "them); their items "
        "return to NEW when the lease expires and run again",
        left);
  }
  db::SchedulerStats stats = stats_ ? stats_() : db::SchedulerStats{};
  std::vector<std::int64_t> drained;
  {
    MutexLock lock(&mutex_);
    stats.items_done = done_;
    stats.items_failed = failed_;
    drained.swap(drained_batches_);
  }
  const auto marked = session_.run("marking the scheduler stopped", [&](db::Connection& conn) {
    db::Queue queue(conn, options_.host);
    queue.mark_batches_drained(drained);
    queue.unregister_scheduler(options_.scheduler_id, stats);
  });
  if (!marked) spdlog::warn("could not mark the scheduler stopped");
}

}  // namespace tw::scheduler
