// One randomized convergence trial (ARCHITECTURE.md, "Convergence": requests reconcile,
// they do not replay): a seeded generator changes a source folder in bursts while the real monitor,
// scheduler, archivers and PostgreSQL archive it and a fault injector strikes at random
// moments. At several quiet moments (nothing being changed, the monitor's event window
// passed, no NEW or DISPATCHED item, the running monitor's catch-up finished) the trial
// records the time T and snapshots the tree. At the end `timewarp restore <src> --at T` of
// each moment must equal its snapshot (with a retention policy: each moment the policy
// keeps; a thinned one may only be refused as thinned) (names, bytes, types, link targets, modes,
// owners, mtimes of files and directories), `timewarp check <src>` must report nothing (skipped
// while the command does not exist) and `timewarp verify` must be clean; no item may end
// FAILED. A failure's report holds the seed, every difference, the versions of the paths
// that differ, and the run's log of operations and faults with their times.
// Used by tests/integration/convergence_test.cpp and bench/soak. Needs
// TIMEWARP_TEST_DATABASE (and TW_PG_DATADIR for database restarts). One trial at a time
// per process is the intended use (it restarts shared things), but nothing is global.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>

#include "integration/convergence_faults.hpp"
#include "integration/convergence_retention.hpp"

namespace tw::test::convergence {

struct Options {
  std::uint64_t seed = 1;
  Faults faults;
  int moments = 5;  // quiet moments; the last one ends the run
  int bursts_per_moment = 5;
  // Operations made before the monitor starts: its first catch-up archives a tree, as a
  // first backup does (queued as SCANs of folders), not an empty folder.
  int initial_operations = 40;
  int max_burst = 25;          // operations per burst: 1 to this many, back to back
  int max_pause_ms = 300;      // pause between bursts: 0 to this (often inside one window)
  double fault_chance = 0.35;  // per burst, and once per quiet moment while it drains
  int retry_permille = 60;     // share of items the proxy fails once (retry fault)
  int archivers = 2;
  double event_delay = 0.1;
  bool large_files = true;
  std::set<std::string> operations;  // when not empty: only these (TreeGenerator::names())
  bool directory_mtimes = true;      // compare directories' mtimes (off only to narrow down)
  std::chrono::seconds drain_timeout{120};
  std::string keep_dir;  // when set, a failed trial's directory is moved here
  // A retention policy, the trial's clock over weeks, forget and gc beside the archivers
  // (convergence_retention.hpp); its forgets and collections are killed now and then when
  // any process fault is on.
  RetentionSettings retention;
  // The bucket variant: the monitor ships to a fresh bucket of the S3 gateway (TW_S3_*)
  // every second, and the checks read the archive from the bucket alone (`--from-store`),
  // the backup root set aside once the monitor stopped (its last shipping run done).
  bool bucket = false;
};

struct Result {
  bool passed = false;
  std::string summary;  // one line: seed, faults, figures, verdict
  std::string report;   // on failure: the differences, outputs and the run's log
  std::string log;      // the run's log of operations, faults and moments (always)
  double seconds = 0;
};

// Runs one trial. Throws only when the trial cannot start (no database configured).
Result run_trial(const Options& options);

}  // namespace tw::test::convergence
