// The retention part of a convergence trial (convergence_harness.hpp): a retention policy,
// a clock that moves over weeks, and `timewarp forget` and `timewarp gc` at random moments
// beside the archivers.
//
// The clock is injected, not waited for: the archivers are timewarp-hooked-archiver with
// --hook-clock-offset, so they stamp versions with the real clock plus an offset this class
// writes to a file. The offset only grows, and only while the system is quiet: at each
// quiet moment the clock jumps to just before the moment's instant (most often a boundary
// the policy keeps: a full hour, a midnight, a Monday; sometimes any instant), so the
// trial's moments span weeks in a run of minutes. Forget runs with --now at the trial's
// clock, so what it keeps is what the policy keeps at that instant.
//
// What must restore: a moment that every forget started so far keeps (by the library's
// own policy arithmetic, whose calendar is tested on its own in retention_test) must
// restore exactly; another moment either restores exactly (a killed forget may not have
// recorded what it thinned) or is refused as thinned. Nothing else passes.
// Used from the trial's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "integration/convergence_log.hpp"

namespace tw::test::convergence {

struct RetentionSettings {
  bool on = false;
  std::string timezone = "Europe/Berlin";
  // The trial's clock starts here: Monday 2026-03-23 10:00 in Berlin, a week before summer
  // time begins (2026-03-29), so runs that span weeks cross the change.
  std::int64_t start_ns = 1'774'256'400LL * 1'000'000'000;
  double keep_within = 7200;  // seconds
  int keep_hourly = 6;
  int keep_daily = 7;
  int keep_weekly = 3;
  // A folder of the sources with a thinner policy of its own (retention_folder; empty:
  // none): its paths keep the moments of the last 10 minutes, 2 full hours and 2 midnights.
  std::string folder;
  double folder_keep_within = 600;  // seconds
  int folder_keep_hourly = 2;
  int folder_keep_daily = 2;
  double forget_chance = 0.3;  // per burst: a forget (which collects afterwards) starts
  double gc_chance = 0.1;      // per burst: a collection alone starts
  bool kill = false;           // SIGKILL a running forget or gc now and then (a fault)
  // The bucket variant's store, for the collections of packs given back once shipped.
  std::vector<std::string> store_args;
};

class Retention {
 public:
  Retention(RetentionSettings settings, std::string work, std::string archive, EventLog& log,
            std::uint64_t seed);
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;
  ~Retention();

  bool on() const { return settings_.on; }
  // The archivers' extra argument (empty when off).
  std::vector<std::string> archiver_args() const;
  // The trial's clock: the real one plus the offset.
  std::int64_t now() const;

  // During a burst: maybe starts a forget or a collection (one at a time), maybe kills the
  // running one, reaps a finished one.
  void during_burst();
  // At a quiet moment: moves the clock to just before the moment's instant and returns it.
  std::int64_t moment_instant();
  // After the last moment: waits for a running child, then a forget and a collection that
  // must succeed. False (and the reason in `why`) when one failed.
  bool finish(std::string& why);

  // Whether every forget started so far keeps `at_ns`: for the archive's scope, and for
  // the folder with a policy of its own.
  bool must_keep(std::int64_t at_ns) const;
  bool must_keep_in_folder(std::int64_t at_ns) const;
  const std::string& folder() const { return settings_.folder; }
  // "policy ...; N forgets (K killed), M collections (L killed), R versions removed".
  std::string summary() const;
  // The policy as `timewarp forget` flags.
  std::vector<std::string> policy_args() const;

 private:
  void set_offset(std::int64_t offset_ns);
  void start(bool forget);
  void reap(bool wait);
  void kill_child();
  std::int64_t next_boundary(std::int64_t after_ns, int kind);

  const RetentionSettings settings_;
  const std::string work_;
  const std::string archive_;
  EventLog& log_;
  std::mt19937_64 rng_;
  std::shared_ptr<Launcher> launcher_;
  std::int64_t offset_ns_ = 0;
  std::vector<std::int64_t> forget_nows_;  // every forget started, by its --now
  std::unique_ptr<ChildProcess> child_;
  bool child_is_forget_ = false;
  int forgets_ = 0, gcs_ = 0, killed_ = 0, failed_ = 0;
  std::uint64_t removed_ = 0;
  std::string last_failure_;
};

}  // namespace tw::test::convergence
