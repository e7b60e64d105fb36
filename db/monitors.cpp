#include "db/monitors.hpp"

#include <vector>

#include "db/queue.hpp"

namespace tw::db {

MonitorRegistration register_monitor(Connection& conn, const std::string& host,
                                     const std::string& host_id, int pid,
                                     std::span<const std::string> escaped_roots, int archivers) {
  std::vector<Param> roots(escaped_roots.begin(), escaped_roots.end());
  auto r = conn.query(
      R"(INSERT INTO timewarp.monitors (host, host_id, pid, source_dirs, archivers)
         VALUES ($1, $2, $3, $4::text[], $5)
         RETURNING id, extract(epoch FROM now())::float8)",
      host, host_id, pid, array_literal(roots), archivers);
  return {r.int64(0, 0), r.float8(0, 1)};
}

bool monitor_registered(Connection& conn, std::int64_t id) {
  return conn.query("SELECT 1 FROM timewarp.monitors WHERE id = $1", id).rows() > 0;
}

void monitor_heartbeat(Connection& conn, std::int64_t id, const MonitorStats& s) {
  // The shipping columns are NULL when there is no store.
  const ShippingFigures none;
  const ShippingFigures& f = s.shipping ? *s.shipping : none;
  const auto when = [&](const auto& value) {
    return s.shipping ? Connection::to_param(value) : Param();
  };
  conn.query(
      R"(UPDATE timewarp.monitors
            SET heartbeat_at = now(), watches = $2, unwatched_dirs = $3, events = $4,
                changes = $5, items_queued = $6, rescans = $7, archivers = $8,
                scheduler_pid = $9, scheduler_restarts = $10,
                catchup_finished_at = CASE WHEN $11 THEN coalesce(catchup_finished_at, now()) END,
                stopped_at = CASE WHEN $12 THEN now() END,
                db_errors = $13, db_error = $14, db_error_since = to_timestamp($15),
                ship_store = $16, ship_read_at = to_timestamp($17), ship_error = $18,
                ship_packs_pending = $19, ship_bytes_pending = $20, ship_removals_pending = $21,
                ship_oldest_pending_at = to_timestamp($22),
                ship_last_shipped_at = to_timestamp($23), catalog_shipped_at = to_timestamp($24)
          WHERE id = $1)",
      id, s.watches, s.unwatched, s.events, s.changes, s.items_queued, s.rescans, s.archivers,
      s.scheduler_pid, s.scheduler_restarts, s.catchup_finished, s.stopping,
      s.database.statement_errors, failing_text(s.database), failing_since(s.database),
      when(f.store), when(f.read_at), f.error.empty() ? Param() : Param(f.error),
      when(f.packs_pending), when(f.bytes_pending), when(f.removals_pending), f.oldest_pending_at,
      f.last_shipped_at, f.catalog_shipped_at);
}

std::optional<ControlSetting> read_control(Connection& conn, std::string_view name) {
  auto r = conn.query(
      "SELECT value, extract(epoch FROM set_at)::float8 FROM timewarp.control WHERE name = $1",
      name);
  if (r.rows() == 0) return std::nullopt;
  return ControlSetting{std::string(r.text(0, 0)), r.float8(0, 1)};
}

void write_control(Connection& conn, std::string_view name, const std::string& value) {
  conn.query(
      R"(INSERT INTO timewarp.control (name, value, set_at) VALUES ($1, $2, now())
         ON CONFLICT (name) DO UPDATE SET value = excluded.value, set_at = excluded.set_at)",
      name, value);
}

}  // namespace tw::db
