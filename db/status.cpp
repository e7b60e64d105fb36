#include "db/status.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace tw::db {
namespace {

// A timestamptz column as ISO 8601 UTC text (NULL stays NULL).
std::string iso(std::string_view column) {
  return fmt::format(R"(to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))", column);
}

std::string item_columns() {
  return fmt::format(
      "id, op, path, dest_path, status, priority, size, {}, {}, {}, {}, {}, "
      "extract(epoch FROM now() - finished_at)::float8, attempts, last_error, scheduler_id, "
      "batch_id, archive_bytes, cpu_us",
      iso("enqueued_at"), iso("not_before"), iso("dispatched_at"), iso("started_at"),
      iso("finished_at"));
}

std::string text_or_empty(const PgResult& r, int row, int col) {
  return r.is_null(row, col) ? std::string() : std::string(r.text(row, col));
}

std::vector<ItemRecord> read_items(const PgResult& r) {
  std::vector<ItemRecord> items;
  items.reserve(static_cast<std::size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    ItemRecord item;
    item.id = r.int64(row, 0);
    item.op = r.text(row, 1);
    item.path = r.text(row, 2);
    item.dest_path = text_or_empty(r, row, 3);
    item.status = r.text(row, 4);
    item.priority = static_cast<int>(r.int64(row, 5));
    item.size = r.opt_int64(row, 6);
    item.enqueued_at = text_or_empty(r, row, 7);
    item.not_before = text_or_empty(r, row, 8);
    item.dispatched_at = text_or_empty(r, row, 9);
    item.started_at = text_or_empty(r, row, 10);
    item.finished_at = text_or_empty(r, row, 11);
    item.finished_age = r.opt_float8(row, 12);
    item.attempts = static_cast<int>(r.int64(row, 13));
    item.last_error = text_or_empty(r, row, 14);
    item.scheduler_id = r.opt_int64(row, 15);
    item.batch_id = r.opt_int64(row, 16);
    item.archive_bytes = r.opt_int64(row, 17);
    item.cpu_us = r.opt_int64(row, 18);
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace

std::vector<SchedulerInfo> running_schedulers(Connection& conn, double max_heartbeat_age) {
  auto r = conn.query(fmt::format(
      R"(SELECT id, host, pid, strategy, batch_size, {},
                extract(epoch FROM now() - heartbeat_at)::float8, archivers, busy_consumers,
                idle_consumers, busy_high_water, batch_queue_length, batch_queue_high_water,
                items_done, items_failed
           FROM timewarp.schedulers
          WHERE stopped_at IS NULL AND heartbeat_at > now() - make_interval(secs => $1)
          ORDER BY id)",
      iso("started_at")),
      max_heartbeat_age);
  std::vector<SchedulerInfo> out;
  for (int row = 0; row < r.rows(); ++row) {
    SchedulerInfo s;
    s.id = r.int64(row, 0);
    s.host = r.text(row, 1);
    s.pid = static_cast<int>(r.int64(row, 2));
    s.strategy = r.text(row, 3);
    s.batch_size = static_cast<int>(r.int64(row, 4));
    s.started_at = text_or_empty(r, row, 5);
    s.heartbeat_age = std::max(0.0, r.float8(row, 6));
    s.archivers = static_cast<int>(r.int64(row, 7));
    s.busy = static_cast<int>(r.int64(row, 8));
    s.idle = static_cast<int>(r.int64(row, 9));
    s.busy_high_water = static_cast<int>(r.int64(row, 10));
    s.batch_queue_length = static_cast<int>(r.int64(row, 11));
    s.batch_queue_high_water = static_cast<int>(r.int64(row, 12));
    s.items_done = r.int64(row, 13);
    s.items_failed = r.int64(row, 14);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

std::vector<DatabaseErrorInfo> read_database_errors(Connection& conn) {
  auto r = conn.query(
      R"(SELECT process, id, host, pid, db_errors, db_error,
                extract(epoch FROM now() - db_error_since)::float8
           FROM (SELECT 'scheduler' AS process, id, host, pid, db_errors, db_error,
                        db_error_since, heartbeat_at, stopped_at
                   FROM timewarp.schedulers
                 UNION ALL
                 SELECT 'monitor', id, host, pid, db_errors, db_error, db_error_since,
                        heartbeat_at, stopped_at
                   FROM timewarp.monitors) p
          WHERE db_error IS NOT NULL AND stopped_at IS NULL
            AND heartbeat_at > now() - interval '1 hour'
          ORDER BY process DESC, id)");
  std::vector<DatabaseErrorInfo> out;
  for (int row = 0; row < r.rows(); ++row) {
    DatabaseErrorInfo e;
    e.process = r.text(row, 0);
    e.id = r.int64(row, 1);
    e.host = r.text(row, 2);
    e.pid = static_cast<int>(r.int64(row, 3));
    e.errors = r.int64(row, 4);
    e.error = r.text(row, 5);
    e.failing_for = std::max(0.0, r.opt_float8(row, 6).value_or(0.0));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

namespace {

// Columns 8 on of read_hosts' query: the shipping figures, when its monitor reads them.
HostStatus::Shipping read_shipping(const PgResult& r, int row) {
  HostStatus::Shipping s;
  s.store = r.text(row, 8);
  s.read_age = std::max(0.0, r.opt_float8(row, 9).value_or(0.0));
  s.error = text_or_empty(r, row, 10);
  s.packs_pending = r.opt_int64(row, 11).value_or(0);
  s.bytes_pending = r.opt_int64(row, 12).value_or(0);
  s.removals_pending = r.opt_int64(row, 13).value_or(0);
  s.oldest_pending_age = r.opt_float8(row, 14);
  s.last_shipped_age = r.opt_float8(row, 15);
  s.catalog_shipped_age = r.opt_float8(row, 16);
  return s;
}

}  // namespace

std::vector<HostStatus> read_hosts(Connection& conn) {
  auto r = conn.query(
      R"(WITH m AS (SELECT DISTINCT ON (host_id) * FROM timewarp.monitors
                     ORDER BY host_id, heartbeat_at DESC, id DESC),
              c AS (SELECT * FROM timewarp.host_counts
                     WHERE new <> 0 OR dispatched <> 0 OR completed <> 0 OR failed <> 0)
         SELECT coalesce(c.host, m.host_id), coalesce(c.new, 0), coalesce(c.dispatched, 0),
                coalesce(c.completed, 0), coalesce(c.failed, 0), m.host, m.pid,
                extract(epoch FROM now() - m.heartbeat_at)::float8, m.ship_store,
                extract(epoch FROM now() - m.ship_read_at)::float8, m.ship_error,
                m.ship_packs_pending, m.ship_bytes_pending, m.ship_removals_pending,
                extract(epoch FROM now() - m.ship_oldest_pending_at)::float8,
                extract(epoch FROM now() - m.ship_last_shipped_at)::float8,
                extract(epoch FROM now() - m.catalog_shipped_at)::float8,
                m.stopped_at IS NOT NULL
           FROM c FULL JOIN m ON m.host_id = c.host
          -- The host '' (items and monitors from before hosts were kept) while it matters.
          WHERE coalesce(c.host, m.host_id) <> '' OR c.new <> 0 OR c.dispatched <> 0
             OR c.failed <> 0
          ORDER BY 1)");
  std::vector<HostStatus> out;
  for (int row = 0; row < r.rows(); ++row) {
    HostStatus h;
    h.host = r.text(row, 0);
    h.waiting = r.int64(row, 1);
    h.dispatched = r.int64(row, 2);
    h.completed = r.int64(row, 3);
    h.failed = r.int64(row, 4);
    if (!r.is_null(row, 5)) {
      h.monitor = HostStatus::Monitor{.machine = std::string(r.text(row, 5)),
                                      .pid = static_cast<int>(r.int64(row, 6)),
                                      .heartbeat_age = std::max(0.0, r.float8(row, 7)),
                                      .stopped = r.text(row, 17) == "t"};
    }
    if (!r.is_null(row, 8)) h.shipping = read_shipping(r, row);
    out.push_back(std::move(h));
  }
  return out;
}

QueueCounts read_queue_counts(Connection& conn, std::string* server_time) {
  auto r = conn.query(fmt::format(
      R"(SELECT claimable, delayed, dispatched, completed, failed,
                extract(epoch FROM oldest_claimable_age)::float8,
                extract(epoch FROM next_retry_at - now())::float8,
                completed_last_minute, failed_last_hour, {}
           FROM timewarp.queue_status)",
      iso("now()")));
  if (server_time) *server_time = r.text(0, 9);
  QueueCounts c;
  c.claimable = r.int64(0, 0);
  c.delayed = r.int64(0, 1);
  c.dispatched = r.int64(0, 2);
  c.completed = r.int64(0, 3);
  c.failed = r.int64(0, 4);
  c.oldest_claimable_age = r.opt_float8(0, 5);
  c.next_retry_in = r.opt_float8(0, 6);
  c.completed_last_minute = r.int64(0, 7);
  c.failed_last_hour = r.int64(0, 8);
  return c;
}

StatusReport read_status(Connection& conn, int max_failures) {
  // One read-only snapshot in as few round trips as the parts allow (a status runs every
  // second under --watch): the counts with the time, the schedulers, the failures when
  // there are any.
  return conn.snapshot([&] {
    StatusReport report;
    report.counts = read_queue_counts(conn, &report.time);
    report.hosts = read_hosts(conn);
    report.schedulers = running_schedulers(conn, 3600);
    report.database_errors = read_database_errors(conn);
    if (max_failures > 0 && report.counts.failed_last_hour > 0) {
      report.recent_failures = read_items(conn.query(fmt::format(R"(SELECT {} FROM timewarp.items
                          WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour'
                          ORDER BY finished_at DESC, id DESC LIMIT $1)",
                                                                 item_columns()),
                                                     max_failures));
    }
    return report;
  });
}

std::vector<ItemRecord> item_history(Connection& conn, const std::string& escaped_path, int limit) {
  // Two index scans (items_path, items_dest_path); the newest `limit` ids, shown oldest first.
  return read_items(conn.query(fmt::format(R"(SELECT {0} FROM timewarp.items WHERE id IN (
                       SELECT id FROM (SELECT id FROM timewarp.items WHERE path = $1
                                       UNION
                                       SELECT id FROM timewarp.items WHERE dest_path = $1) ids
                        ORDER BY id DESC LIMIT $2)
                     ORDER BY id)",
                                           item_columns()),
                               escaped_path, limit > 0 ? std::optional<int>(limit) : std::nullopt));
}

std::vector<ItemRecord> failed_items(Connection& conn, int limit) {
  return read_items(conn.query(fmt::format(R"(SELECT {} FROM timewarp.items WHERE status = 'FAILED'
                     ORDER BY finished_at DESC NULLS LAST, id DESC LIMIT $1)",
                                           item_columns()),
                               limit > 0 ? std::optional<int>(limit) : std::nullopt));
}

namespace {

// Requeues those of `ids` still FAILED; returns the ids requeued.
std::vector<std::int64_t> requeue(Connection& conn, const std::vector<std::int64_t>& ids) {
  auto r = conn.query(
      R"(UPDATE timewarp.items
            SET status = 'NEW', not_before = now(), attempts = 0, scheduler_id = NULL,
                lease_until = NULL,
                last_error = format('requeued by hand after %s failed attempt%s: %s', attempts,
                                    CASE WHEN attempts = 1 THEN '' ELSE 's' END,
                                    coalesce(last_error, '(no error recorded)'))
          WHERE id = ANY($1::bigint[]) AND status = 'FAILED'
      RETURNING id)",
      int_array_literal(ids));
  std::vector<std::int64_t> done;
  for (int row = 0; row < r.rows(); ++row) done.push_back(r.int64(row, 0));
  return done;
}

}  // namespace

RetryOutcome retry_failed(Connection& conn, std::span<const std::int64_t> ids) {
  RetryOutcome outcome;
  if (ids.empty()) return outcome;
  std::vector<std::int64_t> wanted(ids.begin(), ids.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  outcome.requeued = requeue(conn, wanted);
  std::sort(outcome.requeued.begin(), outcome.requeued.end());
  std::vector<std::int64_t> rest;
  std::set_difference(wanted.begin(), wanted.end(), outcome.requeued.begin(),
                      outcome.requeued.end(), std::back_inserter(rest));
  if (rest.empty()) return outcome;
  auto r = conn.query(
      R"(SELECT want.id, coalesce(i.status, '')
           FROM unnest($1::bigint[]) AS want(id)
           LEFT JOIN timewarp.items i ON i.id = want.id
          ORDER BY want.id)",
      int_array_literal(rest));
  for (int row = 0; row < r.rows(); ++row) {
    outcome.refused.emplace_back(r.int64(row, 0), std::string(r.text(row, 1)));
  }
  return outcome;
}

std::int64_t retry_all_failed(Connection& conn, int chunk) {
  // The ids first: an item that fails again while we work is not picked up a second time.
  auto r = conn.query("SELECT id FROM timewarp.items WHERE status = 'FAILED' ORDER BY id");
  std::vector<std::int64_t> ids;
  ids.reserve(static_cast<std::size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) ids.push_back(r.int64(row, 0));
  const std::size_t step = static_cast<std::size_t>(std::max(1, chunk));
  std::int64_t total = 0;
  for (std::size_t at = 0; at < ids.size(); at += step) {
    const std::vector<std::int64_t> part(
        ids.begin() + static_cast<std::ptrdiff_t>(at),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + step)));
    total += static_cast<std::int64_t>(requeue(conn, part).size());
  }
  return total;
}

}  // namespace tw::db
