// What the operator asks of the master queue: one consistent status snapshot (backlog,
// progress, schedulers, recent failures), the items of one path, the failed items, and
// requeueing failed items by hand. Every read stays cheap with millions of rows: totals
// come from the counters migration 0003 keeps, everything else from partial-index ranges.
// Not thread-safe: use from the thread that owns the Connection.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "db/connection.hpp"
#include "db/queue.hpp"

namespace tw::db {

// One row of timewarp.schedulers: who and where, then the figures its heartbeat
// records. Times are ISO 8601 UTC text ("2024-05-01T12:00:00.000Z").
struct SchedulerInfo : SchedulerStats {
  std::int64_t id = 0;
  std::string host;
  int pid = 0;
  std::string strategy;
  int batch_size = 0;
  std::string started_at;
  double heartbeat_age = 0;  // seconds since its last heartbeat
};

// One row of timewarp.items. Paths are in their stored (escaped) form; times are ISO 8601
// UTC text, empty when NULL.
struct ItemRecord {
  std::int64_t id = 0;
  std::string op;
  std::string path;
  std::string dest_path;
  std::string status;
  int priority = 0;
  std::optional<std::int64_t> size;
  std::string enqueued_at;
  std::string not_before;
  std::string dispatched_at;
  std::string started_at;
  std::string finished_at;
  std::optional<double> finished_age;  // seconds since finished_at
  int attempts = 0;
  std::string last_error;
  std::optional<std::int64_t> scheduler_id;
  std::optional<std::int64_t> batch_id;
  std::optional<std::int64_t> archive_bytes;
  std::optional<std::int64_t> cpu_us;
};

// A scheduler or monitor that keeps failing a statement (db/session.hpp), from its row.
struct DatabaseErrorInfo {
  std::string process;  // "scheduler", "monitor"
  std::int64_t id = 0;
  std::string host;
  int pid = 0;
  std::int64_t errors = 0;  // statement errors since the process started
  std::string error;        // the one failing now
  double failing_for = 0;   // seconds
};

// One host_id's part of the database (ARCHITECTURE.md, "Object store"): its queue, from the
// counters kept by host, and its newest monitor row, with what that monitor last read of its
// archive's shipping. Ages are seconds before the snapshot.
struct HostStatus {
  std::string host;  // its host_id; "" for items queued before items had a host
  std::int64_t waiting = 0, dispatched = 0, completed = 0, failed = 0;  // waiting: NEW
  // Its newest monitor (by heartbeat): the machine's name, pid, and whether it has stopped.
  struct Monitor {
    std::string machine;
    int pid = 0;
    double heartbeat_age = 0;
    bool stopped = false;
  };
  std::optional<Monitor> monitor;
  // What that monitor last read of its archive's shipping; none without a pack store. The
  // shipped figures' times are ages here.
  struct Shipping {
    std::string store;
    double read_age = 0;
    std::string error;
    std::int64_t packs_pending = 0, bytes_pending = 0, removals_pending = 0;
    std::optional<double> oldest_pending_age, last_shipped_age, catalog_shipped_age;
  };
  std::optional<Shipping> shipping;
};

struct StatusReport {
  std::string time;    // the server's clock when the snapshot was taken
  QueueCounts counts;  // every host's items together
  // Every host with items counted or a monitor row, by host_id; the host "" (items and
  // monitors from before hosts were kept) only while it has items waiting, dispatched or
  // failed.
  std::vector<HostStatus> hosts;
  // Schedulers not stopped, including those whose heartbeat stopped less than an hour ago
  // (look at heartbeat_age to tell them apart), in id order.
  std::vector<SchedulerInfo> schedulers;
  // Failures of the last hour, newest first, at most the number asked for
  // (counts.failed_last_hour has them all).
  std::vector<ItemRecord> recent_failures;
  // Running schedulers and monitors with a statement failing now, in id order.
  std::vector<DatabaseErrorInfo> database_errors;
};

// The counts of timewarp.queue_status (what Queue::counts() returns); with `server_time`,
// also the server's clock, ISO 8601.
QueueCounts read_queue_counts(Connection& conn, std::string* server_time = nullptr);

// Every host's queue and its newest monitor, by host_id (HostStatus; StatusReport::hosts).
std::vector<HostStatus> read_hosts(Connection& conn);

// Schedulers not stopped whose last heartbeat is at most `max_heartbeat_age` seconds old,
// in id order.
std::vector<SchedulerInfo> running_schedulers(Connection& conn, double max_heartbeat_age);

// Reads everything in one read-only snapshot, so the parts agree with each other.
StatusReport read_status(Connection& conn, int max_failures);

// Every item whose path, or MOVE destination, is `escaped_path`, oldest first; with a
// limit above 0 only the newest `limit` of them.
std::vector<ItemRecord> item_history(Connection& conn, const std::string& escaped_path, int limit);

// FAILED items, most recently failed first; with a limit above 0 at most that many.
std::vector<ItemRecord> failed_items(Connection& conn, int limit);

struct RetryOutcome {
  std::vector<std::int64_t> requeued;
  // Ids left as they were, with their status ("" when no such item exists).
  std::vector<std::pair<std::int64_t, std::string>> refused;
};

// Puts FAILED items back to NEW, claimable now, with a fresh attempt budget; last_error
// keeps what the item went through ("requeued by hand after N failed attempts: ..."). The
// queue's triggers wake the monitor. Items not FAILED are left as they are.
RetryOutcome retry_failed(Connection& conn, std::span<const std::int64_t> ids);

// retry_failed for every item FAILED when called, `chunk` items per statement. Items that
// fail again while this runs are not requeued a second time. Returns how many were.
std::int64_t retry_all_failed(Connection& conn, int chunk = 10000);

}  // namespace tw::db
