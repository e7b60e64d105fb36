// The record of one convergence run: what the generator did to the tree, what the fault
// injector did to the processes, when the quiet moments were taken, each line stamped with
// the wall clock. Printed with a failure so a seed's run can be read back step by step.
// Lines written by the fault-injecting archivers (their --fault-log file) are merged in by
// time when the log is rendered. Safe to use from several threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tw::test::convergence {

// Nanoseconds since the epoch (the clock the archive stamps versions with).
std::int64_t wall_ns();

class EventLog {
 public:
  EventLog();

  // `who` is a short tag ("op", "fault", "moment", "system"); `what` is already escaped.
  void add(const std::string& who, const std::string& what);
  // Adds lines of the form "<ns>\t<who>\t<what>" from a file (the proxies' log).
  void merge_file(const std::string& path);

  // Every line, oldest first, as "+12.345 who: what" relative to the log's start.
  std::string render() const;
  std::size_t size() const;
  std::int64_t start_ns() const { return start_ns_; }

 private:
  struct Line {
    std::int64_t ns;
    std::string who;
    std::string what;
  };
  const std::int64_t start_ns_;
  mutable std::mutex mutex_;
  std::vector<Line> lines_;  // guarded by mutex_
};

}  // namespace tw::test::convergence
