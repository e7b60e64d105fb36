#include "db/housekeeping.hpp"

#include <algorithm>

namespace tw::db {

std::int64_t prune_completed(Connection& conn, double older_than_seconds, int batch_rows,
                             int max_batches) {
  const int rows = std::max(1, batch_rows);
  std::int64_t total = 0;
  for (int batch = 0; max_batches <= 0 || batch < max_batches; ++batch) {
    // items_completed (finished_at) WHERE status = 'COMPLETED' serves the scan.
    auto r = conn.query(
        R"(DELETE FROM timewarp.items
            WHERE id IN (SELECT id FROM timewarp.items
                          WHERE status = 'COMPLETED'
                            AND finished_at < now() - make_interval(secs => $1)
                          ORDER BY finished_at
                          LIMIT $2
                          FOR UPDATE SKIP LOCKED))",
        older_than_seconds, rows);
    const std::int64_t deleted = r.affected();
    total += deleted;
    if (deleted < rows) break;
  }
  return total;
}

AuditPruneResult prune_audit(Connection& conn, double older_than_seconds, int batch_rows) {
  const int rows = std::max(1, batch_rows);
  AuditPruneResult result;
  while (true) {
    // Batch ids grow with claimed_at, so the oldest come first in primary-key order.
    auto r = conn.query(
        R"(DELETE FROM timewarp.batches
            WHERE id IN (SELECT b.id FROM timewarp.batches b
                          WHERE b.claimed_at < now() - make_interval(secs => $1)
                            AND NOT EXISTS (SELECT 1 FROM timewarp.items i
                                             WHERE i.status = 'DISPATCHED' AND i.batch_id = b.id)
                          ORDER BY b.id
                          LIMIT $2
                          FOR UPDATE SKIP LOCKED))",
        older_than_seconds, rows);
    result.batches += r.affected();
    if (r.affected() < rows) break;
  }
  auto r = conn.query(
      R"(DELETE FROM timewarp.schedulers s
          WHERE coalesce(s.stopped_at, s.heartbeat_at) < now() - make_interval(secs => $1)
            AND s.heartbeat_at < now() - make_interval(secs => $1)
            AND NOT EXISTS (SELECT 1 FROM timewarp.batches b WHERE b.scheduler_id = s.id))",
      older_than_seconds);
  result.schedulers = r.affected();
  return result;
}

}  // namespace tw::db
