#include "db/queue.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/config.hpp"
#include "db/status.hpp"

namespace tw::db {
namespace {

std::string order_by(Strategy strategy) {
  switch (strategy) {
    case Strategy::Fifo:
      return "id";
    case Strategy::Lifo:
      return "id DESC";
    case Strategy::Priority:
      return "priority DESC, id";
    case Strategy::Fair:
      return "id";  // the fair claim has its own statement
  }
  return "id";
}

// The rows of the queue's host, parameter $`n` (and those queued before items had a host),
// or every row when it is empty (Queue's comment); `alias` names the table ("o.").
std::string own_host(int n, std::string_view alias = "") {
  const std::string host = fmt::format("{}host", alias);
  return fmt::format("(${0} = '' OR {1} = ${0} OR {1} = '')", n, host);
}

// Claimable rows, locked and skipped when another claimer holds them. For `fair`, every
// source root contributes its oldest rows in turn: rank rows within their root and take
// the lowest ranks first, so a busy tree cannot starve a quiet one. The roots are found
// with a skip scan of the fair index (one probe per root), and each root offers at most a
// batch of its oldest rows, so a claim reads (roots x batch) rows, not the whole queue.
// The host is $6.
std::string candidates_sql(Strategy strategy) {
  if (strategy == Strategy::Fair) {
    return fmt::format(R"(
      SELECT id, op, path FROM timewarp.items
       WHERE id = ANY (ARRAY(
             SELECT ranked.id FROM (
                    WITH RECURSIVE roots AS (
                         SELECT min(source_root) AS root FROM timewarp.items
                          WHERE status = 'NEW' AND {0}
                         UNION ALL
                         SELECT (SELECT min(source_root) FROM timewarp.items
                                  WHERE status = 'NEW' AND {0} AND source_root > roots.root)
                           FROM roots WHERE roots.root IS NOT NULL)
                    SELECT oldest.id, oldest.turn
                      FROM roots,
                           LATERAL (SELECT id, row_number() OVER (ORDER BY id) AS turn
                                      FROM timewarp.items
                                     WHERE status = 'NEW' AND not_before <= now()
                                       AND source_root = roots.root AND {0}
                                     ORDER BY id
                                     LIMIT $2) oldest
                     WHERE roots.root IS NOT NULL) ranked
              ORDER BY ranked.turn, ranked.id
              LIMIT $2))
         AND status = 'NEW' AND not_before <= now()
       FOR UPDATE SKIP LOCKED)",
                       own_host(6));
  }
  return fmt::format(R"(
      SELECT id, op, path FROM timewarp.items
       WHERE status = 'NEW' AND not_before <= now() AND {}
       ORDER BY {}
       LIMIT $2
       FOR UPDATE SKIP LOCKED)",
                     own_host(6), order_by(strategy));
}

// The claim of one batch in one statement: $1 scheduler, $2 batch size, $3 lease seconds,
// $4 strategy, $5 coalesce, $6 host.
std::string claim_sql(Strategy strategy) {
  const std::string order = strategy == Strategy::Fair ? "id" : order_by(strategy);
  // Coalescing looks up, path by path, the other claimable changes to the batch's paths
  // (a nested loop over the path index: the LATERAL subquery with its own row locks is
  // never flattened into a hash join over the whole table). A change whose path is
  // involved in a pending MOVE keeps its order; that check runs only when some MOVE is
  // pending at all. The claimed rows are then found through the primary key, one look-up
  // per id (an IN over the CTEs is planned as a hash join over a scan of the whole table).
  return fmt::format(R"(
    WITH batch AS (SELECT nextval('timewarp.batch_ids') AS id),
         candidates AS ({0}),
         moves AS (
           SELECT EXISTS (SELECT 1 FROM timewarp.items
                           WHERE op = 'MOVE' AND status IN ('NEW', 'DISPATCHED')) AS pending),
         extra AS (
           SELECT e.id
             FROM (SELECT DISTINCT c.path FROM candidates c WHERE $5 AND c.op <> 'MOVE') p,
                  LATERAL (
                    SELECT o.id FROM timewarp.items o
                     WHERE o.path = p.path AND o.status = 'NEW' AND o.not_before <= now()
                       AND {2} AND o.op <> 'MOVE' AND o.id NOT IN (SELECT id FROM candidates)
                       AND (NOT (SELECT pending FROM moves) OR NOT timewarp.move_pending(o.path))
                       FOR UPDATE SKIP LOCKED) e),
         claimed AS (
           UPDATE timewarp.items i
              SET status = 'DISPATCHED', scheduler_id = $1, batch_id = (SELECT id FROM batch),
                  dispatched_at = now(), lease_until = now() + make_interval(secs => $3)
            WHERE i.id = ANY (ARRAY(SELECT id FROM candidates UNION ALL SELECT id FROM extra))
        RETURNING i.id, i.op, i.path, i.dest_path, i.attempts, i.batch_id, i.priority, i.size),
         audit AS (
           INSERT INTO timewarp.batches (id, scheduler_id, strategy, requested, size)
           SELECT (SELECT id FROM batch), $1, $4, $2, count(*) FROM claimed HAVING count(*) > 0)
    SELECT id, op, path, dest_path, attempts, batch_id,
           $5 AND op <> 'MOVE'
              AND (NOT (SELECT pending FROM moves) OR NOT timewarp.move_pending(path)),
           coalesce(size, 0)
      FROM claimed ORDER BY {1})",
                     candidates_sql(strategy), order, own_host(6, "o."));
}

// The claimed rows as items, the changes to one coalescible path folded into the first.
std::vector<ClaimedItem> claimed_items(const PgResult& result) {
  std::vector<ClaimedItem> items;
  items.reserve(static_cast<std::size_t>(result.rows()));
  // Coalescible path -> the item it folds into, and the op of the newest change seen for it
  // (whose id is the item's order.newest).
  struct Group {
    std::size_t index;
    Op newest_op;
    bool any_update;
    bool any_scan;
  };
  std::unordered_map<std::string, Group> groups;
  std::int64_t horizon = 0;  // every id up to the largest claimed was handed out before now
  for (int r = 0; r < result.rows(); ++r) {
    ClaimedItem item;
    item.id = result.int64(r, 0);
    item.order.newest = item.id;
    horizon = std::max(horizon, item.id);
    item.op = parse_op(result.text(r, 1)).value_or(Op::Update);
    item.path = std::string(result.text(r, 2));
    if (!result.is_null(r, 3)) item.dest_path = std::string(result.text(r, 3));
    item.attempts = static_cast<int>(result.int64(r, 4));
    item.batch_id = result.int64(r, 5);
    item.size = static_cast<std::uint64_t>(std::max<std::int64_t>(0, result.int64(r, 7)));
    if (result.text(r, 6) == "t") {
      const auto [it, fresh] = groups.try_emplace(
          item.path, Group{items.size(), item.op, item.op == Op::Update, item.op == Op::Scan});
      if (!fresh) {
        Group& g = it->second;
        ClaimedItem& lead = items[g.index];
        lead.followers.push_back(item.id);
        g.any_update = g.any_update || item.op == Op::Update;
        g.any_scan = g.any_scan || item.op == Op::Scan;
        if (item.id > lead.order.newest) {
          lead.order.newest = item.id;
          g.newest_op = item.op;
        }
        continue;
      }
    }
    items.push_back(std::move(item));
  }
  // The newest change decides the op, but a STAT never hides an UPDATE, and a SCAN (which
  // does what any other op on its path does, and looks at the directory's entries too) is
  // never hidden.
  for (const auto& [path, g] : groups) {
    ClaimedItem& lead = items[g.index];
    if (lead.followers.empty()) continue;
    lead.op = g.any_scan                                ? Op::Scan
              : g.newest_op == Op::Stat && g.any_update ? Op::Update
                                                        : g.newest_op;
  }
  for (auto& item : items) item.order.horizon = horizon;
  return items;
}

}  // namespace

std::optional<Strategy> parse_strategy(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kStrategies); ++i) {
    if (kStrategies[i] == text) return static_cast<Strategy>(i);
  }
  return std::nullopt;
}

std::string_view to_string(Strategy strategy) {
  return kStrategies[static_cast<std::size_t>(strategy)];
}

std::vector<std::int64_t> Queue::enqueue(std::span<const NewItem> items) {
  std::vector<std::int64_t> ids;
  if (items.empty()) return ids;
  std::vector<Param> ops, paths, dests, roots, priorities, sizes, mtimes;
  for (const auto& item : items) {
    ops.emplace_back(std::string(to_string(item.op)));
    paths.emplace_back(item.path);
    dests.push_back(item.op == Op::Move ? Param(item.dest_path) : std::nullopt);
    roots.emplace_back(item.source_root);
    priorities.emplace_back(std::to_string(item.priority));
    sizes.push_back(item.size ? Param(std::to_string(*item.size)) : std::nullopt);
    mtimes.push_back(item.mtime ? Connection::to_param(*item.mtime) : std::nullopt);
  }
  auto result = conn_.query(
      R"(INSERT INTO timewarp.items (op, path, dest_path, source_root, priority, size, mtime, host)
         SELECT op, path, dest_path, source_root, priority, size, to_timestamp(mtime), $8
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[],
                       $6::bigint[], $7::float8[])
                WITH ORDINALITY AS t(op, path, dest_path, source_root, priority, size, mtime, n)
          ORDER BY n
         RETURNING id)",
      array_literal(ops), array_literal(paths), array_literal(dests), array_literal(roots),
      array_literal(priorities), array_literal(sizes), array_literal(mtimes), host_);
  ids.reserve(static_cast<std::size_t>(result.rows()));
  for (int r = 0; r < result.rows(); ++r) ids.push_back(result.int64(r, 0));
  return ids;
}

std::vector<ClaimedItem> Queue::claim(const ClaimRequest& request) {
  auto result =
      conn_.prepared(claim_sql(request.strategy), request.scheduler_id, request.batch_size,
                     request.lease_seconds, to_string(request.strategy), request.coalesce, host_);
  return claimed_items(result);
}

std::int64_t Queue::complete(std::int64_t scheduler_id, std::span<const Completion> done) {
  if (done.empty()) return 0;
  std::vector<std::int64_t> ids, bytes, cpu;
  std::vector<Param> started, finished, notes;
  for (const auto& c : done) {
    ids.push_back(c.id);
    bytes.push_back(static_cast<std::int64_t>(c.archive_bytes));
    cpu.push_back(static_cast<std::int64_t>(c.cpu_us));
    started.push_back(Connection::to_param(c.started_at));
    finished.push_back(Connection::to_param(c.finished_at));
    notes.push_back(c.note.empty() ? Param() : Param(c.note));
  }
  auto result = conn_.prepared(
      R"(UPDATE timewarp.items i
            SET status = 'COMPLETED', archive_bytes = d.bytes, cpu_us = d.cpu,
                started_at = to_timestamp(d.started), finished_at = to_timestamp(d.finished),
                last_error = coalesce(d.note, i.last_error), lease_until = NULL
           FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[],
                       $7::text[]) AS d(id, bytes, cpu, started, finished, note)
          WHERE i.id = d.id AND i.status = 'DISPATCHED' AND i.scheduler_id = $1)",
      scheduler_id, int_array_literal(ids), int_array_literal(bytes), int_array_literal(cpu),
      array_literal(started), array_literal(finished), array_literal(notes));
  return result.affected();
}

FailOutcome Queue::fail(std::int64_t scheduler_id, std::span<const Failure> failures,
                        const RetryPolicy& policy) {
  FailOutcome outcome;
  if (failures.empty()) return outcome;
  std::vector<std::int64_t> ids;
  std::vector<Param> permanent, errors, started, finished;
  for (const auto& f : failures) {
    ids.push_back(f.id);
    permanent.push_back(Connection::to_param(f.permanent));
    errors.emplace_back(f.error);
    started.push_back(Connection::to_param(f.started_at));
    finished.push_back(Connection::to_param(f.finished_at));
  }
  auto result = conn_.query(
      R"(WITH d AS (
           SELECT * FROM unnest($2::bigint[], $3::bool[], $4::text[], $5::float8[], $6::float8[])
                  AS d(id, permanent, error, started, finished)),
         changed AS (
           UPDATE timewarp.items i
              SET attempts = i.attempts + 1,
                  last_error = d.error,
                  started_at = to_timestamp(d.started),
                  finished_at = to_timestamp(d.finished),
                  status = CASE WHEN d.permanent OR i.attempts + 1 >= $7 THEN 'FAILED' ELSE 'NEW' END,
                  not_before = CASE WHEN d.permanent OR i.attempts + 1 >= $7 THEN i.not_before
                                    ELSE now() + make_interval(secs =>
                                         least($9::float8, $8::float8 * power(2, i.attempts))
                                         * (0.5 + random() * 0.5)) END,
                  scheduler_id = NULL, lease_until = NULL
             FROM d
            WHERE i.id = d.id AND i.status = 'DISPATCHED' AND i.scheduler_id = $1
        RETURNING i.status)
         SELECT count(*) FILTER (WHERE status = 'NEW'), count(*) FILTER (WHERE status = 'FAILED')
           FROM changed)",
      scheduler_id, int_array_literal(ids), array_literal(permanent), array_literal(errors),
      array_literal(started), array_literal(finished), policy.max_attempts, policy.base_delay,
      policy.max_delay);
  outcome.retried = result.int64(0, 0);
  outcome.failed = result.int64(0, 1);
  return outcome;
}

std::int64_t Queue::release(std::int64_t scheduler_id, std::span<const std::int64_t> ids) {
  if (ids.empty()) return 0;
  auto result = conn_.query(
      R"(UPDATE timewarp.items
            SET status = 'NEW', scheduler_id = NULL, batch_id = NULL, dispatched_at = NULL,
                lease_until = NULL
          WHERE id = ANY($2::bigint[]) AND status = 'DISPATCHED' AND scheduler_id = $1)",
      scheduler_id, int_array_literal(std::vector<std::int64_t>(ids.begin(), ids.end())));
  return result.affected();
}

std::int64_t Queue::recover_expired_leases(int max_attempts) {
  auto result = conn_.query(
      R"(UPDATE timewarp.items
            SET attempts = attempts + 1,
                last_error = format('lease of scheduler %s expired', scheduler_id),
                status = CASE WHEN attempts + 1 >= $1 THEN 'FAILED' ELSE 'NEW' END,
                finished_at = CASE WHEN attempts + 1 >= $1 THEN now() END,
                scheduler_id = NULL, lease_until = NULL
          WHERE status = 'DISPATCHED' AND lease_until < now())",
      max_attempts);
  return result.affected();
}

SessionHealth combined(const SessionHealth& a, const SessionHealth& b) {
  SessionHealth out = a.failing.empty() ? b : a;
  out.statement_errors = a.statement_errors + b.statement_errors;
  return out;
}

std::optional<std::string> failing_text(const SessionHealth& health) {
  if (health.failing.empty()) return std::nullopt;
  return health.failing;
}

std::optional<double> failing_since(const SessionHealth& health) {
  if (health.failing.empty()) return std::nullopt;
  return health.failing_since;
}

std::int64_t Queue::register_scheduler(const std::string& host, int pid, std::string_view strategy,
                                       int batch_size, int archivers) {
  auto result = conn_.query(
      R"(INSERT INTO timewarp.schedulers (host, pid, strategy, batch_size, archivers)
         VALUES ($1, $2, $3, $4, $5) RETURNING id)",
      host, pid, strategy, batch_size, archivers);
  return result.int64(0, 0);
}

void Queue::heartbeat(std::int64_t scheduler_id, const SchedulerStats& s, double lease_seconds,
                      std::span<const std::int64_t> held_ids) {
  conn_.query(
      R"(WITH renewed AS (
           UPDATE timewarp.items SET lease_until = now() + make_interval(secs => $10)
            WHERE id = ANY($11::bigint[]) AND status = 'DISPATCHED' AND scheduler_id = $1)
         UPDATE timewarp.schedulers
            SET heartbeat_at = now(), archivers = $2, busy_consumers = $3, idle_consumers = $4,
                busy_high_water = $5, batch_queue_length = $6, batch_queue_high_water = $7,
                items_done = $8, items_failed = $9, stopped_at = NULL, db_errors = $12,
                db_error = $13, db_error_since = to_timestamp($14)
          WHERE id = $1)",
      scheduler_id, s.archivers, s.busy, s.idle, s.busy_high_water, s.batch_queue_length,
      s.batch_queue_high_water, s.items_done, s.items_failed, lease_seconds,
      int_array_literal(std::vector<std::int64_t>(held_ids.begin(), held_ids.end())),
      s.database.statement_errors, failing_text(s.database), failing_since(s.database));
}

void Queue::unregister_scheduler(std::int64_t scheduler_id, const SchedulerStats& s) {
  conn_.query(
      R"(UPDATE timewarp.schedulers
            SET heartbeat_at = now(), stopped_at = now(), archivers = 0, busy_consumers = 0,
                idle_consumers = 0, busy_high_water = $2, batch_queue_length = 0,
                batch_queue_high_water = $3, items_done = $4, items_failed = $5
          WHERE id = $1)",
      scheduler_id, s.busy_high_water, s.batch_queue_high_water, s.items_done, s.items_failed);
}

void Queue::mark_batches_drained(std::span<const std::int64_t> batch_ids) {
  if (batch_ids.empty()) return;
  conn_.query("UPDATE timewarp.batches SET drained_at = now() WHERE id = ANY($1::bigint[])",
              int_array_literal(std::vector<std::int64_t>(batch_ids.begin(), batch_ids.end())));
}

QueueCounts Queue::counts() { return read_queue_counts(conn_); }

std::int64_t Queue::count_claimable(std::int64_t cap) {
  auto r = conn_.query(
      fmt::format("SELECT count(*) FROM (SELECT 1 FROM timewarp.items WHERE status = 'NEW' "
                  "AND not_before <= now() AND {} LIMIT $1) capped",
                  own_host(2)),
      cap, host_);
  return r.int64(0, 0);
}

bool Queue::analyze_if_stale() {
  // Prepared: it runs before every claim, and planning it cost four times its run. A table
  // never analyzed (reltuples -1: a new queue) is analyzed as soon as it holds a change:
  // planned without statistics, the claim looks up each path of its batch by scanning
  // every waiting row (29 ms for 100 of 606 rows, against 4 ms once analyzed).
  auto r = conn_.prepared(
      "SELECT n > greatest(1000, 2 * t) OR (t < 0 AND n > 0) "
      "FROM (SELECT coalesce(sum(n), 0) AS n FROM timewarp.item_counts "
      "WHERE status = 'NEW') c, "
      "(SELECT reltuples AS t FROM pg_class WHERE oid = 'timewarp.items'::regclass) s");
  if (r.text(0, 0) != "t") return false;
  try {
    conn_.exec("ANALYZE timewarp.items");
  } catch (const SqlError& e) {
    if (e.retryable()) throw;
    static std::once_flag warned;
    std::call_once(warned, [&] {
      spdlog::warn("cannot refresh the queue's statistics (ANALYZE timewarp.items): {}", e.what());
    });
    return false;
  }
  return true;
}

bool Queue::has_claimable() {
  auto r = conn_.query(fmt::format("SELECT EXISTS (SELECT 1 FROM timewarp.items WHERE status = "
                                   "'NEW' AND not_before <= now() AND {})",
                                   own_host(1)),
                       host_);
  return r.text(0, 0) == "t";
}

std::optional<double> Queue::next_delayed_in() {
  auto r =
      conn_.query(fmt::format("SELECT extract(epoch FROM min(not_before) - now())::float8 FROM "
                              "timewarp.items WHERE status = 'NEW' AND not_before > now() AND {}",
                              own_host(1)),
                  host_);
  return r.opt_float8(0, 0);
}

std::vector<std::pair<std::string, std::string>> Queue::waiting_beneath(
    std::span<const std::string> escaped_roots) {
  auto r = conn_.query(
      fmt::format(R"(SELECT op, path FROM timewarp.items i
          WHERE status = 'NEW' AND {}
            AND EXISTS (SELECT 1 FROM unnest($1::text[]) AS r(root)
                         WHERE r.root = '/' OR i.path = r.root
                            OR starts_with(i.path, r.root || '/')))",
                  own_host(2, "i.")),
      array_literal(std::vector<Param>(escaped_roots.begin(), escaped_roots.end())), host_);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) out.emplace_back(r.text(row, 0), r.text(row, 1));
  return out;
}

}  // namespace tw::db
