// Runs real timewarp-scheduler processes with the fault-injecting archiver against a test
// database, and reads back what the archivers recorded.
#pragma once

#include <fmt/format.h>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "db/queue.hpp"
#include "support/test_support.hpp"

namespace tw::test {

class SchedulerFixture {
 public:
  explicit SchedulerFixture(const TestDatabase& db) : db_(db), record_((dir_ / "record.log").string()) {}

  std::unique_ptr<ChildProcess> start(const std::vector<std::string>& extra) {
    LaunchSpec spec{scheduler_exe(),
                    {"--backup-root=" + (dir_ / "archive").string(),
                     "--archiver-exe=" + fake_archiver_exe(), "--archiver-arg=--record=" + record_,
                     "--flush-interval=0.01", "--heartbeat-interval=0.2", "--log-level=info"},
                    {{"TIMEWARP_DATABASE", db_.conninfo()}}};
    spec.args.insert(spec.args.end(), extra.begin(), extra.end());
    return launcher_->launch(spec);
  }

  void fill(int n, const std::string& prefix = "/src/file") {
    auto conn = db_.connect();
    conn.query(
        "INSERT INTO timewarp.items (op, path, source_root) "
        "SELECT 'UPDATE', $1 || g, '/src' FROM generate_series(1, $2) g",
        prefix, n);
  }

  std::int64_t count(const std::string& where) const {
    return db_.count("SELECT count(*) FROM timewarp.items WHERE " + where);
  }

  // How many times the archivers finished each item.
  std::map<std::int64_t, int> runs() const {
    std::map<std::int64_t, int> out;
    std::istringstream in(read_file(record_));
    std::int64_t id;
    while (in >> id) ++out[id];
    return out;
  }

  const TempDir& dir() const { return dir_; }

 private:
  const TestDatabase& db_;
  TempDir dir_;
  std::string record_;
  std::shared_ptr<Launcher> launcher_ = make_process_launcher();
};

// Sends READY and waits for the answering READY.
inline bool drain_once(ChildProcess& scheduler, std::chrono::milliseconds timeout) {
  if (!scheduler.write_line("READY")) return false;
  std::string line;
  return scheduler.read_line(line, timeout) == ChildProcess::ReadStatus::Line && line == "READY";
}

}  // namespace tw::test
