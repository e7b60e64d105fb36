// bench/latency: with the real monitor running (real scheduler and archivers), a writer
// changes files at a steady rate; for each write, the delay until the item that carries it
// is COMPLETED in the queue. Printed per rate: median, 99th percentile and maximum, and
// whether every change reached the archive (the latest version of every file written
// holds the last content written).
//
// Beside it, a baseline from the same run: the same writes to files outside the watched
// tree, each queued directly by the writer with an INSERT of its own (db::Queue::enqueue),
// so the difference is what change detection and batching (event_delay) add. One round
// trip per write also caps the baseline writer's rate: compare the rates reached.
//
// Usage: timewarp-bench-latency [--admin CONNINFO] [--rates 10,100,1000] [--seconds N]
//                               [--files N] [--archivers N] [--event-delay S]
// CONNINFO defaults to TIMEWARP_TEST_DATABASE; a scratch database is created and dropped.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "archive/sha256.hpp"
#include "archive/store.hpp"
#include "common/escape.hpp"
#include "common/process.hpp"
#include "db/connection.hpp"
#include "db/migrations.hpp"
#include "db/queue.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

struct Write {
  std::string path;
  double at = 0;  // epoch seconds, just before the write
};

struct Figures {
  std::size_t writes = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  std::size_t lost = 0;        // writes with no COMPLETED item queued after them
  std::size_t mismatched = 0;  // files whose latest archived content is not the last written
  double seconds = 0;
};

template <class Fn>
bool wait_until(Fn&& fn, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (fn()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fn();
}

std::int64_t count(tw::db::Connection& conn, const std::string& sql) {
  return conn.exec(sql).int64(0, 0);
}

class Bench {
 public:
  Bench(std::string conninfo, fs::path dir, int files, int archivers, double event_delay)
      : conninfo_(std::move(conninfo)),
        dir_(std::move(dir)),
        files_(files),
        archivers_(archivers),
        event_delay_(event_delay),
        conn_(conninfo_) {}

  void start_monitor() {
    fs::create_directories(src());
    fs::create_directories(outside());
    for (int i = 0; i < files_; ++i) {
      write_file(file(src(), i), "initial");
      write_file(file(outside(), i), "initial");
    }
    tw::LaunchSpec spec{
        TW_MONITOR_EXE,
        {"--backup-root=" + (dir_ / "archive").string(), "--source=" + src().string(),
         fmt::format("--archivers={}", archivers_), fmt::format("--event-delay={}", event_delay_),
         "--log-level=warn", "--flush-interval=0.01", "--heartbeat-interval=1"},
        {{"TIMEWARP_DATABASE", conninfo_}}};
    monitor_ = tw::make_process_launcher()->launch(spec);
    if (!wait_until(
            [&] {
              return count(conn_,
                           "SELECT count(*) FROM timewarp.monitors WHERE catchup_finished_at IS "
                           "NOT NULL") == 1 &&
                     count(conn_,
                           "SELECT count(*) FROM timewarp.items WHERE status IN ('NEW', "
                           "'DISPATCHED')") == 0;
            },
            std::chrono::seconds(300))) {
      throw std::runtime_error("the monitor did not finish its start-up catch-up");
    }
  }

  void stop_monitor() {
    if (!monitor_) return;
    ::kill(monitor_->pid(), SIGTERM);
    if (!monitor_->wait_exit(std::chrono::seconds(60)))
      monitor_->terminate(std::chrono::seconds(1));
    monitor_.reset();
  }

  // Writes at `rate` per second for `seconds`; with `direct`, to files outside the watched
  // tree, each queued by the writer itself.
  Figures run(int rate, double seconds, bool direct) {
    const auto first_id = count(conn_, "SELECT coalesce(max(id), 0) FROM timewarp.items");
    const int n = std::max(1, static_cast<int>(rate * seconds));
    std::vector<Write> writes;
    writes.reserve(static_cast<std::size_t>(n));
    std::map<std::string, std::string> last_content;
    tw::db::Queue queue(conn_);
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_until(
          start + std::chrono::microseconds(static_cast<std::int64_t>(1e6 * i / rate)));
      const fs::path path = file(direct ? outside() : src(), (round_ * 7919 + i) % files_);
      const std::string content =
          fmt::format("round {} write {} at {:.6f}", round_, i, epoch_now());
      writes.push_back({path.string(), epoch_now()});
      write_file(path, content);
      last_content[path.string()] = content;
      if (direct) {
        tw::db::NewItem item;
        item.path = tw::escape_bytes(path.string());
        queue.enqueue(std::vector<tw::db::NewItem>{item});
      }
    }
    const double writing = std::chrono::duration<double>(Clock::now() - start).count();
    ++round_;

    // Every write needs a COMPLETED item queued after it.
    Figures f;
    f.writes = writes.size();
    f.seconds = writing;
    std::map<std::string, std::vector<std::pair<double, double>>>
        items;  // path -> (enqueued, finished)
    wait_until(
        [&] {
          return count(conn_, fmt::format(
                                  "SELECT count(*) FROM timewarp.items WHERE id > {} AND status IN "
                                  "('NEW', 'DISPATCHED')",
                                  first_id)) == 0 &&
                 count(conn_, fmt::format("SELECT count(*) FROM timewarp.items WHERE id > {}",
                                          first_id)) > 0;
        },
        std::chrono::seconds(300));
    // A little longer, for changes still in the monitor's window.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int>(event_delay_ * 1000) + 500));
    wait_until(
        [&] {
          return count(conn_, fmt::format(
                                  "SELECT count(*) FROM timewarp.items WHERE id > {} AND status IN "
                                  "('NEW', 'DISPATCHED')",
                                  first_id)) == 0;
        },
        std::chrono::seconds(300));
    auto r = conn_.query(
        R"(SELECT path, extract(epoch FROM enqueued_at)::float8, extract(epoch FROM finished_at)::float8
             FROM timewarp.items WHERE id > $1 AND status = 'COMPLETED' ORDER BY id)",
        first_id);
    for (int row = 0; row < r.rows(); ++row) {
      auto raw = tw::unescape_bytes(r.text(row, 0));
      if (!raw) continue;
      items[*raw].emplace_back(r.float8(row, 1), r.float8(row, 2));
    }
    std::vector<double> delays;
    for (const auto& w : writes) {
      const auto& list = items[w.path];
      const auto it =
          std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first >= w.at; });
      if (it == list.end()) {
        ++f.lost;
        continue;
      }
      delays.push_back((it->second - w.at) * 1000.0);
    }
    std::sort(delays.begin(), delays.end());
    if (!delays.empty()) {
      const auto at = [&](double q) {
        return delays[std::min(delays.size() - 1,
                               static_cast<std::size_t>(q * (delays.size() - 1) + 0.5))];
      };
      f.p50_ms = at(0.50);
      f.p99_ms = at(0.99);
      f.max_ms = delays.back();
    }
    // The archive holds the last content of every file written.
    auto store =
        tw::archive::Store::open((dir_ / "archive").string(), tw::archive::Store::Mode::ReadOnly);
    if (!store) throw std::runtime_error(store.error());
    for (const auto& [path, content] : last_content) {
      auto versions = store->versions(path);
      if (!versions || versions->empty() ||
          versions->back().sha256 != tw::archive::sha256_hex(content)) {
        ++f.mismatched;
      }
    }
    return f;
  }

 private:
  fs::path src() const { return dir_ / "src"; }
  fs::path outside() const { return dir_ / "outside"; }
  static fs::path file(const fs::path& base, int i) { return base / fmt::format("f{:05d}", i); }

  std::string conninfo_;
  fs::path dir_;
  int files_;
  int archivers_;
  double event_delay_;
  tw::db::Connection conn_;
  std::unique_ptr<tw::ChildProcess> monitor_;
  int round_ = 0;
};

void print(const char* what, int rate, const Figures& f) {
  fmt::print(
      "{:<9} {:>5}/s asked, {:>6.0f}/s reached ({:>6} writes) | p50 {:>7.1f} ms | p99 {:>7.1f} ms "
      "| "
      "max {:>7.1f} ms | lost {} | archive mismatches {}\n",
      what, rate, f.writes / f.seconds, f.writes, f.p50_ms, f.p99_ms, f.max_ms, f.lost,
      f.mismatched);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string admin =
      std::getenv("TIMEWARP_TEST_DATABASE") ? std::getenv("TIMEWARP_TEST_DATABASE") : "";
  std::vector<int> rates{10, 100, 1000};
  double seconds = 10;
  int files = 1000, archivers = 2;
  double event_delay = 0.1;
  bool baseline = true;
  CLI::App app{"timewarp-bench-latency: write-to-COMPLETED delay with the monitor running"};
  app.add_option("--admin", admin, "maintenance connection string (a scratch database is made)");
  app.add_option("--rates", rates, "changes per second, one run each")->delimiter(',');
  app.add_option("--seconds", seconds, "length of each run")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--files", files, "files the writer cycles through")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--archivers", archivers)->check(CLI::Range(1, 256));
  app.add_option("--event-delay", event_delay, "the monitor's event_delay, seconds")
      ->check(CLI::Range(0.0, 60.0));
  app.add_flag("!--no-baseline", baseline, "skip the direct-enqueue baseline");
  CLI11_PARSE(app, argc, argv);
  if (admin.empty()) {
    std::cerr << "bench/latency: give --admin CONNINFO or set TIMEWARP_TEST_DATABASE\n";
    return 2;
  }
  const std::string name = fmt::format("tw_bench_latency_{}", ::getpid());
  std::string tmp = (fs::temp_directory_path() / "tw-bench-latency-XXXXXX").string();
  if (::mkdtemp(tmp.data()) == nullptr) {
    std::cerr << "bench/latency: cannot make a temporary directory\n";
    return 1;
  }
  int status = 0;
  try {
    tw::db::Connection root(admin);
    root.exec("CREATE DATABASE " + name);
    try {
      const std::string conninfo = admin + " dbname=" + name;
      {
        tw::db::Connection conn(conninfo);
        tw::db::migrate(conn);
      }
      Bench bench(conninfo, tmp, files, archivers, event_delay);
      fmt::print(
          "bench/latency: {} files, {} archivers, event_delay {} s, {} s per rate, {} cores\n",
          files, archivers, event_delay, seconds, std::thread::hardware_concurrency());
      bench.start_monitor();
      for (const int rate : rates) {
        print("monitor", rate, bench.run(rate, seconds, false));
        if (baseline) print("baseline", rate, bench.run(rate, seconds, true));
      }
      bench.stop_monitor();
    } catch (const std::exception& e) {
      std::cerr << "bench/latency: " << e.what() << "\n";
      status = 1;
    }
    root.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
  } catch (const std::exception& e) {
    std::cerr << "bench/latency: " << e.what() << "\n";
    status = 1;
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return status;
}
