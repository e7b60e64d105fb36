// The fault switches of a convergence run and the injector that deals them at random
// moments (ARCHITECTURE.md, "Convergence": events arrive late, twice, merged or out of
// order).
// Each fault has its own switch so a failing seed can be narrowed down; the injector draws
// from its own random stream, so switching a fault off does not change the operations the
// generator makes. Used from one thread.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "integration/convergence_log.hpp"
#include "integration/convergence_system.hpp"

namespace tw::test::convergence {

struct Faults {
  bool retry = true;             // the proxy answers FAILED RETRY for chosen items
  bool kill_archiver = true;     // SIGKILL of an archiver (proxy or real)
  bool kill_scheduler = true;    // SIGKILL of the scheduler; the monitor restarts it
  bool kill_monitor = true;      // SIGKILL of the monitor; started again with the same arguments
  bool restart_database = true;  // pg_ctl restart (needs TW_PG_DATADIR; the test runs alone)
  bool second_scheduler = true;  // a second scheduler, SIGSTOPped holding items, then killed
  // The S3 gateway stopped and started again (the trial's bucket variant only).
  bool restart_gateway = false;

  static Faults none() { return {false, false, false, false, false, false, false}; }
  bool any_process_fault() const {
    return kill_archiver || kill_scheduler || kill_monitor || restart_database || second_scheduler;
  }
  // "retry kill-archiver ..." or "none".
  std::string describe() const;
};

class FaultInjector {
 public:
  FaultInjector(System& system, std::uint64_t seed, EventLog& log, Faults faults);

  // Deals one fault, drawn among the switched-on process faults. Nothing when none is on.
  void fire();
  // Moves the second scheduler on and restarts a monitor that died by itself.
  void tick();
  // Draws whether a fault strikes in this burst of `n` operations: the index before which it
  // strikes, or -1.
  int strike_point(int n, double chance);

  int fired() const { return fired_; }

 private:
  enum class Kind {
    KillArchiver,
    KillScheduler,
    KillMonitor,
    RestartDatabase,
    SecondScheduler,
    RestartGateway
  };

  System& system_;
  std::mt19937_64 rng_;
  EventLog& log_;
  std::vector<Kind> kinds_;
  int fired_ = 0;
};

}  // namespace tw::test::convergence
