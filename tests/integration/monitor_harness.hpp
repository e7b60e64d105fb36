// A source tree, an archive and the real timewarp-monitor (with the real scheduler and
// archivers) on a per-test database, plus what the monitor tests ask of them: waiting for
// queue items, and `timewarp versions` / `timewarp restore` as an operator would run them.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/escape.hpp"
#include "db/connection.hpp"
#include "integration/monitor_fixture.hpp"

namespace tw::test {

// One version as `timewarp versions --json` gives it.
struct VersionLine {
  int number = 0;
  std::string op;
  std::string size;
  std::string sha256;
  std::string extra;  // from=, to=, link=, directory
};

class MonitorHarness {
 public:
  MonitorHarness() : MonitorHarness(std::make_shared<TestDatabase>()) {}
  // Another host's monitor on the database of `other` (its own sources, archive and log).
  struct SameDatabase {
    const MonitorHarness& as;
  };
  explicit MonitorHarness(SameDatabase same) : MonitorHarness(same.as.shared_db_) {}

  std::filesystem::path src() const { return dir_ / "src"; }
  std::string path(const std::string& name) const { return (src() / name).string(); }
  std::string archive() const { return (dir_ / "archive").string(); }
  std::string log_file() const { return (dir_ / "monitor.log").string(); }
  const TestDatabase& db() const { return *shared_db_; }
  const TempDir& dir() const { return dir_; }

  // Arguments every start gets; `extra` comes after them (and may repeat a key).
  std::vector<std::string> base_args() const {
    return {"--backup-root=" + archive(), "--source=" + src().string(), "--event-delay=0.05",
            "--flush-interval=0.01",      "--heartbeat-interval=0.2",   "--log-file=" + log_file()};
  }

  // `env` is set in the monitor's environment on top of the test's own.
  void start(std::vector<std::string> extra = {"--archivers=2"},
             std::vector<std::pair<std::string, std::string>> env = {}) {
    auto args = base_args();
    args.insert(args.end(), extra.begin(), extra.end());
    monitor_ = std::make_unique<MonitorProcess>(db_, args, std::move(env));
  }
  // Waits until the monitor's start-up catch-up has queued what it found.
  ::testing::AssertionResult wait_catchup(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const bool ok = wait_until(
        [&] {
          return db_.count(fmt::format("SELECT count(*) FROM timewarp.monitors WHERE pid = {} AND "
                                       "catchup_finished_at IS NOT NULL AND stopped_at IS NULL",
                                       monitor_->pid())) == 1;
        },
        timeout);
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the monitor's catch-up did not finish";
  }
  int stop() {
    const int status = monitor_->stop();
    monitor_.reset();
    return status;
  }
  pid_t pid() const { return monitor_->pid(); }

  // Items with this op and (raw) path.
  std::int64_t items(const std::string& op, const std::string& raw_path,
                     const std::string& status = "") const {
    auto conn = db_.connect();
    auto r = conn.query(
        "SELECT count(*) FROM timewarp.items WHERE op = $1 AND path = $2 AND ($3 = '' OR status = "
        "$3)",
        op, escape_bytes(raw_path), status);
    return r.int64(0, 0);
  }
  std::int64_t open_items() const {
    return db_.count("SELECT count(*) FROM timewarp.items WHERE status IN ('NEW', 'DISPATCHED')");
  }
  std::string failures() const {
    return db_.scalar(
        "SELECT string_agg(op || ' ' || path || ': ' || coalesce(last_error, ''), '; ') "
        "FROM timewarp.items WHERE status = 'FAILED'");
  }
  // Waits until the queue has held nothing NEW or DISPATCHED for `quiet` in a row (longer
  // than the monitor's event window: nothing it saw is still on its way).
  ::testing::AssertionResult drained_for(std::chrono::milliseconds quiet,
                                         std::chrono::seconds timeout = std::chrono::seconds(60)) {
    auto quiet_since = std::chrono::steady_clock::now();
    const bool ok = wait_until(
        [&] {
          const auto now = std::chrono::steady_clock::now();
          if (open_items() > 0) quiet_since = now;
          return now - quiet_since >= quiet;
        },
        timeout, std::chrono::milliseconds(20));
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << open_items() << " items still open";
  }
  // Waits until `count` items `op path` are COMPLETED and nothing else waits in the queue.
  ::testing::AssertionResult wait_done(const std::string& op, const std::string& raw_path,
                                       std::int64_t count = 1,
                                       std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const bool ok = wait_until(
        [&] { return items(op, raw_path, "COMPLETED") >= count && open_items() == 0; }, timeout);
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << op << " " << escape_bytes(raw_path) << ": " << items(op, raw_path, "COMPLETED")
           << " completed of " << count << "; open " << open_items() << "; failed: " << failures()
           << "; all: "
           << db_.scalar(
                  "SELECT string_agg(op || ' ' || path || ' ' || status, '; ' ORDER BY id) "
                  "FROM timewarp.items");
  }

  // Read from `versions --json`, the form for scripts; `extra` as the fields the lines of
  // the first releases had after the path (paths escaped).
  std::vector<VersionLine> versions(const std::string& raw_path) const {
    std::string out;
    if (run_command({cli_exe(), "--backup-root=" + archive(), "versions", "--json", raw_path},
                    &out) != 0) {
      return {};
    }
    const auto doc = nlohmann::json::parse(out);
    std::vector<VersionLine> lines;
    for (const auto& v : doc.at("paths").at(0).at("versions")) {
      VersionLine line{v.at("number"), v.at("op"),
                       std::to_string(v.at("size").get<std::uint64_t>()),
                       v.at("sha256").is_null() ? "-" : v.at("sha256").get<std::string>(), ""};
      std::vector<std::string> extra;
      for (const auto& [key, name] :
           {std::pair{"link_target", "link="}, {"moved_from", "from="}, {"moved_to", "to="}}) {
        if (!v.at(key).is_null()) extra.push_back(name + v.at(key).get<std::string>());
      }
      if (v.at("type") == "directory") extra.emplace_back("directory");
      for (const auto& e : extra) line.extra += (line.extra.empty() ? "" : " ") + e;
      lines.push_back(std::move(line));
    }
    return lines;
  }
  // "UPDATE STAT MOVE ..." — the ops of the versions of a path, oldest first.
  std::string ops(const std::string& raw_path) const {
    std::string out;
    for (const auto& v : versions(raw_path)) out += (out.empty() ? "" : " ") + v.op;
    return out;
  }
  // Restores `raw_path` (latest version, or `version`) to a fresh file; its content, or
  // nothing when the restore failed.
  std::optional<std::string> restore(const std::string& raw_path, int version = 0) {
    const auto to = dir_ / fmt::format("restored-{}", ++restores_);
    std::vector<std::string> argv{
        cli_exe(), "--backup-root=" + archive(), "restore", raw_path, "--to", to.string()};
    if (version > 0) {
      argv.push_back("--version");
      argv.push_back(std::to_string(version));
    }
    std::string out;
    if (run_command(argv, &out) != 0) return std::nullopt;
    return read_file(to);
  }
  std::filesystem::path restored_path() const {
    return dir_ / fmt::format("restored-{}", restores_);
  }

 private:
  explicit MonitorHarness(std::shared_ptr<TestDatabase> db)
      : shared_db_(std::move(db)), db_(*shared_db_) {
    std::filesystem::create_directories(src());
  }

  std::shared_ptr<TestDatabase> shared_db_;
  const TestDatabase& db_;
  TempDir dir_;
  std::unique_ptr<MonitorProcess> monitor_;
  int restores_ = 0;
};

}  // namespace tw::test
