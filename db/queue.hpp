// The master-queue API (ARCHITECTURE.md, "The master queue") over one Connection: enqueue many
// items in one round trip, claim a batch in one statement (FOR UPDATE SKIP LOCKED under a
// matching partial index), complete, fail and release many items per statement, recover
// expired leases, and read the counts. Every statement commits at once; no transaction
// stays open while an archiver works. Not thread-safe: one Queue per thread, like its
// Connection.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/protocol.hpp"
#include "db/connection.hpp"
#include "db/session.hpp"

namespace tw::db {

// The claim orders; their names are kStrategies (common/config.hpp), in this order.
enum class Strategy { Fifo, Lifo, Priority, Fair };
std::optional<Strategy> parse_strategy(std::string_view text);
std::string_view to_string(Strategy strategy);

struct NewItem {
  Op op = Op::Update;
  std::string path;         // escaped
  std::string dest_path;    // escaped; MOVE only
  std::string source_root;  // escaped watched root the path belongs to ('' if none)
  int priority = 0;
  std::optional<std::int64_t> size;
  std::optional<double> mtime;  // seconds since the epoch
};

struct ClaimRequest {
  std::int64_t scheduler_id = 0;
  int batch_size = 100;
  Strategy strategy = Strategy::Fifo;
  double lease_seconds = 60;
  // Fold several claimable changes to one path into one dispatched item (see claim()).
  bool coalesce = false;
};

struct ClaimedItem {
  std::int64_t id = 0;
  Op op = Op::Update;
  std::string path;
  std::string dest_path;
  int attempts = 0;  // failed attempts so far
  std::int64_t batch_id = 0;
  std::uint64_t size = 0;  // of the file when the change was seen (0: unknown or none)
  // Other items for the same path folded into this one by coalescing: they were claimed
  // too and share this item's outcome.
  std::vector<std::int64_t> followers;
  // Its place in the queue, sent with the request (common/protocol.hpp, QueueOrder): the
  // newest of its own and its followers' ids, and the largest id of the claim it came in.
  QueueOrder order;
};

struct Completion {
  std::int64_t id = 0;
  std::uint64_t archive_bytes = 0;
  std::uint64_t cpu_us = 0;
  double started_at = 0;   // seconds since the epoch
  double finished_at = 0;  // seconds since the epoch
  std::string note;        // e.g. why a vanished file needed nothing; stored in last_error
};

struct Failure {
  std::int64_t id = 0;
  bool permanent = false;
  std::string error;
  double started_at = 0;
  double finished_at = 0;
};

struct RetryPolicy {
  int max_attempts = 5;
  double base_delay = 1.0;  // seconds; attempt k waits min(max, base * 2^k), jittered
  double max_delay = 300.0;
};

struct FailOutcome {
  std::int64_t retried = 0;  // back to NEW with a later not_before
  std::int64_t failed = 0;   // FAILED for good
};

struct QueueCounts {
  std::int64_t claimable = 0;
  std::int64_t delayed = 0;
  std::int64_t dispatched = 0;
  std::int64_t completed = 0;
  std::int64_t failed = 0;
  std::optional<double> oldest_claimable_age;  // seconds
  std::optional<double> next_retry_in;         // seconds until the earliest delayed item
  std::int64_t completed_last_minute = 0;
  std::int64_t failed_last_hour = 0;
};

struct SchedulerStats {
  int archivers = 0;
  int busy = 0;
  int idle = 0;
  int busy_high_water = 0;
  int batch_queue_length = 0;
  int batch_queue_high_water = 0;
  std::int64_t items_done = 0;
  std::int64_t items_failed = 0;
  SessionHealth database;  // statement errors of the scheduler's sessions
};

// Of two threads' session health, the one to report: errors added, a failing one kept.
SessionHealth combined(const SessionHealth& a, const SessionHealth& b);
// A health's failing error and its start as statement parameters (NULL when none fails).
std::optional<std::string> failing_text(const SessionHealth& health);
std::optional<double> failing_since(const SessionHealth& health);

// The master queue as one host's monitor and scheduler see it: the items they queue carry
// `host` (the configuration's host_id), and claims, looks at what is claimable and waiting
// take that host's items and those queued before items had a host (''); another host's are
// left alone. An empty `host` sees every item and queues with none (tests, tools).
class Queue {
 public:
  explicit Queue(Connection& conn, std::string host = {}) : conn_(conn), host_(std::move(host)) {}

  // Inserts all items in one statement; returns their ids in order.
  std::vector<std::int64_t> enqueue(std::span<const NewItem> items);

  // Claims up to batch_size claimable items for the scheduler, in the strategy's order,
  // in one statement; records the batch in timewarp.batches. With coalesce, every other
  // claimable change to a claimed item's path is claimed with it and folded into one item
  // (the latest op wins, but a STAT never hides an UPDATE), unless a MOVE involving the
  // path is pending: those keep their order.
  std::vector<ClaimedItem> claim(const ClaimRequest& request);

  // Marks items COMPLETED; only items this scheduler holds (DISPATCHED, its id) change.
  // Returns the number of rows changed.
  std::int64_t complete(std::int64_t scheduler_id, std::span<const Completion> done);

  // Records failed attempts: back to NEW with backoff while attempts remain, else FAILED.
  FailOutcome fail(std::int64_t scheduler_id, std::span<const Failure> failures,
                   const RetryPolicy& policy);

  // Returns never-started items to NEW (a stopping scheduler's batch queue).
  std::int64_t release(std::int64_t scheduler_id, std::span<const std::int64_t> ids);

  // Returns to NEW (or FAILED, when out of attempts) every DISPATCHED item whose lease has
  // expired, whoever held it. Any live scheduler may call this.
  std::int64_t recover_expired_leases(int max_attempts);

  // Scheduler registration and heartbeat (which also renews this scheduler's leases).
  std::int64_t register_scheduler(const std::string& host, int pid, std::string_view strategy,
                                  int batch_size, int archivers);
  // Refreshes the scheduler's row and renews the leases of the items it still holds.
  void heartbeat(std::int64_t scheduler_id, const SchedulerStats& stats, double lease_seconds,
                 std::span<const std::int64_t> held_ids);
  void unregister_scheduler(std::int64_t scheduler_id, const SchedulerStats& stats);
  void mark_batches_drained(std::span<const std::int64_t> batch_ids);

  QueueCounts counts();
  bool has_claimable();
  // Brings the planner's statistics of timewarp.items up to date (ANALYZE) when far more
  // changes wait than the statistics know rows: on a table filled faster than autovacuum
  // looks (a first catch-up queues thousands of rows in a second), the claim's coalescing
  // look-up is otherwise planned as a scan of every waiting row per path. True when it ran.
  // A refusal (no privilege) is logged once and ignored: the claim works without it.
  bool analyze_if_stale();
  // Seconds until the earliest delayed NEW item falls due (nothing when none waits).
  std::optional<double> next_delayed_in();
  // The NEW items whose path lies beneath one of `escaped_roots` ("/" is every path): op
  // and escaped path each.
  std::vector<std::pair<std::string, std::string>> waiting_beneath(
      std::span<const std::string> escaped_roots);
  // Claimable items, counted up to `cap` (so the count stays cheap with a huge backlog).
  std::int64_t count_claimable(std::int64_t cap);

 private:
  Connection& conn_;
  std::string host_;
};

}  // namespace tw::db
