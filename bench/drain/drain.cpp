// bench/drain: how fast the whole scheduler path drains the master queue, beside the
// database's own bound measured in the same run.
//
//   (a) scheduler: N NEW items; timewarp-scheduler driven directly over its signal pipe
//       (no monitor), with `timewarp-archiver --null` children; from READY sent to READY
//       received, every item COMPLETED.
//   (b) bare SQL: the same claim and complete statements (db::Queue) issued in a loop by
//       one connection, no processes.
//
// Also prints the scheduler's peak resident memory (VmHWM) during the drain, and the CPU
// time spent per 1,000 items by each party (scheduler, archivers, PostgreSQL backends;
// read from /proc, so the database must run on this machine for the last one): on a
// shared, noisy machine CPU per item says more than a rate does.
// Usage: timewarp-bench-drain [--admin CONNINFO] [--items N] [--archivers N]
//                             [--batch-size N] [--rounds N]
// CONNINFO defaults to TIMEWARP_TEST_DATABASE; a scratch database is created and dropped.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>
#include <iostream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/process.hpp"
#include "db/connection.hpp"
#include "db/migrations.hpp"
#include "db/queue.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void fill(tw::db::Connection& conn, int n) {
  conn.exec("TRUNCATE timewarp.items, timewarp.batches, timewarp.schedulers");
  conn.query(
      "INSERT INTO timewarp.items (op, path, source_root) "
      "SELECT 'UPDATE', '/bench/src/file' || g, '/bench/src' FROM generate_series(1, $1) g",
      n);
  conn.exec("VACUUM ANALYZE timewarp.items");
}

// CPU seconds (user + system, all threads) a process has used so far, 0 if it is gone.
double cpu_seconds(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
    if (i == 15) break;
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Children of `parent` (the scheduler's archivers).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    if (fields >> state >> ppid && ppid == parent) out.push_back(std::stoi(name));
  }
  return out;
}

// PostgreSQL backends connected to the current database, other than this connection.
std::vector<pid_t> backends(tw::db::Connection& conn) {
  auto r = conn.exec(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
      "AND pid <> pg_backend_pid()");
  std::vector<pid_t> pids;
  for (int i = 0; i < r.rows(); ++i) pids.push_back(static_cast<pid_t>(r.int64(i, 0)));
  return pids;
}

// The processor's model name and the 1-minute load average: the conditions a figure was
// measured under, printed beside it.
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown processor";
}

double load_average() {
  std::ifstream loadavg("/proc/loadavg");
  double one_minute = -1;
  loadavg >> one_minute;
  return one_minute;
}

double total_cpu(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (const auto pid : pids) sum += cpu_seconds(pid);
  return sum;
}

struct SqlRun {
  double rate = 0;
  double backend_cpu = 0;  // seconds
};

SqlRun bare_sql(tw::db::Connection& conn, int n, int batch_size) {
  fill(conn, n);
  const auto backend = static_cast<pid_t>(conn.exec("SELECT pg_backend_pid()").int64(0, 0));
  const double cpu_before = cpu_seconds(backend);
  tw::db::Queue q(conn);
  const auto sid = q.register_scheduler("bench", static_cast<int>(::getpid()), "fifo", batch_size, 0);
  const auto start = Clock::now();
  std::int64_t done = 0;
  while (true) {
    const auto batch = q.claim({sid, batch_size, tw::db::Strategy::Fifo, 60, true});
    if (batch.empty()) break;
    std::vector<tw::db::Completion> completions;
    completions.reserve(batch.size());
    const double now = 1.7e9;
    for (const auto& item : batch) completions.push_back({item.id, 0, 0, now, now, {}});
    done += q.complete(sid, completions);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (done != n) throw std::runtime_error(fmt::format("bare SQL completed {} of {}", done, n));
  return {n / seconds, cpu_seconds(backend) - cpu_before};
}

long peak_rss_kib(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

struct SchedulerRun {
  double rate = 0;
  long peak_rss_kib = -1;
  double scheduler_cpu = 0;  // seconds, each
  double archivers_cpu = 0;
  double backends_cpu = 0;
};

SchedulerRun scheduler(tw::db::Connection& conn, const std::string& conninfo, int n, int archivers,
                       int batch_size) {
  fill(conn, n);
  auto launcher = tw::make_process_launcher();
  tw::LaunchSpec spec{TW_SCHEDULER_EXE,
                      {"--backup-root=/nonexistent-bench-root", "--archiver-exe=" TW_ARCHIVER_EXE,
                       "--archiver-arg=--null", fmt::format("--archivers={}", archivers),
                       fmt::format("--batch-size={}", batch_size), "--log-level=warn"},
                      {{"TIMEWARP_DATABASE", conninfo}}};
  auto child = launcher->launch(spec);
  // Let the archivers start before the clock does: the figure is the steady-state drain.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto archiver_pids = children_of(child->pid());
  const double scheduler_before = cpu_seconds(child->pid());
  const double archivers_before = total_cpu(archiver_pids);
  const auto backend_pids = backends(conn);
  const double backends_before = total_cpu(backend_pids);
  const auto start = Clock::now();
  child->write_line("READY");
  std::string line;
  if (child->read_line(line, std::chrono::minutes(10)) != tw::ChildProcess::ReadStatus::Line ||
      line != "READY") {
    throw std::runtime_error("the scheduler did not answer READY");
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  SchedulerRun run;
  run.scheduler_cpu = cpu_seconds(child->pid()) - scheduler_before;
  run.archivers_cpu = total_cpu(archiver_pids) - archivers_before;
  run.backends_cpu = total_cpu(backend_pids) - backends_before;
  run.peak_rss_kib = peak_rss_kib(child->pid());
  child->write_line("STOP");
  child->wait_exit(std::chrono::seconds(30));
  auto left = conn.exec("SELECT count(*) FROM timewarp.items WHERE status <> 'COMPLETED'");
  if (left.int64(0, 0) != 0) {
    throw std::runtime_error(fmt::format("{} items not COMPLETED after READY", left.int64(0, 0)));
  }
  run.rate = n / seconds;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  std::string admin = std::getenv("TIMEWARP_TEST_DATABASE") ? std::getenv("TIMEWARP_TEST_DATABASE") : "";
  int items = 100000, archivers = 2, batch_size = 1000, rounds = 1;
  CLI::App app{"timewarp-bench-drain: scheduler drain rate vs the bare SQL loop"};
  app.add_option("--admin", admin, "maintenance connection string (a scratch database is made)");
  app.add_option("--items", items)->check(CLI::Range(1, 100000000));
  app.add_option("--archivers", archivers)->check(CLI::Range(1, 256));
  app.add_option("--batch-size", batch_size)->check(CLI::Range(1, 100000));
  app.add_option("--rounds", rounds)->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (admin.empty()) {
    std::cerr << "bench/drain: give --admin CONNINFO or set TIMEWARP_TEST_DATABASE\n";
    return 2;
  }
  const std::string name = fmt::format("tw_bench_drain_{}", ::getpid());
  try {
    tw::db::Connection root(admin);
    root.exec("CREATE DATABASE " + name);
    const std::string conninfo = admin + " dbname=" + name;
    int status = 0;
    try {
      tw::db::Connection conn(conninfo);
      tw::db::migrate(conn);
      fmt::print("bench/drain: {} items, {} null archivers, batch size {}, {} cores ({})\n",
                 items, archivers, batch_size, std::thread::hardware_concurrency(), cpu_model());
      for (int r = 1; r <= rounds; ++r) {
        const double load = load_average();
        const auto sql = bare_sql(conn, items, batch_size);
        const auto run = scheduler(conn, conninfo, items, archivers, batch_size);
        fmt::print("round {}: scheduler {:>9.0f} items/s | bare SQL loop {:>9.0f} items/s | "
                   "ratio {:.2f} | scheduler peak RSS {:.1f} MiB | load average before {:.2f}\n",
                   r, run.rate, sql.rate, run.rate / sql.rate, run.peak_rss_kib / 1024.0, load);
        const double per_k = 1000.0 * 1000.0 / items;  // seconds -> ms per 1,000 items
        fmt::print("         CPU ms per 1,000 items: scheduler {:.1f}, archivers {:.1f}, its "
                   "PostgreSQL backends {:.1f} | bare SQL loop's backend {:.1f}\n",
                   run.scheduler_cpu * per_k, run.archivers_cpu * per_k,
                   run.backends_cpu * per_k, sql.backend_cpu * per_k);
      }
    } catch (const std::exception& e) {
      std::cerr << "bench/drain: " << e.what() << "\n";
      status = 1;
    }
    root.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    return status;
  } catch (const std::exception& e) {
    std::cerr << "bench/drain: " << e.what() << "\n";
    return 1;
  }
}
