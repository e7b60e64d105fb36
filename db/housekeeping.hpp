// Housekeeping of the master queue: COMPLETED items older than an age are removed in small
// batches (one short statement each, committed at once, so no long lock and no long
// transaction), keeping the hot part of timewarp.items small; the audit rows of
// timewarp.batches and of stopped schedulers older than the same age go with them. Safe to
// run from several processes at once (rows another pruner holds are skipped). Not
// thread-safe: use from the thread that owns the Connection.
#pragma once

#include <cstdint>

#include "db/connection.hpp"

namespace tw::db {

// Deletes COMPLETED items that finished more than `older_than_seconds` ago, oldest first,
// `batch_rows` per statement, until none is left or `max_batches` statements have run
// (0: no limit). Returns the number of items deleted. With a limit, a result of
// batch_rows * max_batches means more may be left.
std::int64_t prune_completed(Connection& conn, double older_than_seconds, int batch_rows,
                             int max_batches = 0);

struct AuditPruneResult {
  std::int64_t batches = 0;     // rows of timewarp.batches
  std::int64_t schedulers = 0;  // rows of timewarp.schedulers
};

// Deletes batch records claimed more than `older_than_seconds` ago that hold no DISPATCHED
// item any more, then scheduler records that stopped (or stopped heart-beating) that long
// ago and have no batch record left, `batch_rows` per statement.
AuditPruneResult prune_audit(Connection& conn, double older_than_seconds, int batch_rows);

}  // namespace tw::db
