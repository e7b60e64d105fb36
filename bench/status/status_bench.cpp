// timewarp-bench-status: how long `timewarp status` takes with a big queue.
//
// Fills a fresh database with --rows items (default 10 million) in the shape of a busy
// installation — mostly COMPLETED over the last 30 days, a backlog of claimable, delayed
// and dispatched items, failures, completions in the last minute, two schedulers — then
// times the real `timewarp status` and `status --json` (process start, connection and
// queries: what an operator waits for), and beside them, as the baseline, the counts the
// way the original status view took them (a full count per status). Optionally times
// `prune` too. Prints one line per figure.
//
//   timewarp-bench-status [--admin CONNINFO] [--rows N] [--runs N] [--prune-rows N]
//                         [--keep | --reuse DATABASE]
//
// CONNINFO names a maintenance database of a server where we may create databases
// (default: $TIMEWARP_TEST_DATABASE).
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "db/connection.hpp"
#include "db/housekeeping.hpp"
#include "db/migrations.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Stats {
  double min = 0, median = 0, p95 = 0, max = 0;
};

Stats summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  };
  return {v.front(), at(0.5), at(0.95), v.back()};
}

// CPU time (user + system) of the last command run by time_command, in ms.
double last_cpu_ms = 0;

// Runs argv with stdout on /dev/null; returns the wall time in ms, or -1 when it failed.
double time_command(const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> raw;
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  const auto start = Clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  const double elapsed = ms_since(start);
  last_cpu_ms = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000.0 +
                (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000.0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? elapsed : -1;
}

struct ProcessStats {
  Stats wall;
  Stats cpu;  // user + system time of the process itself
};

ProcessStats time_process(int runs, const std::vector<std::string>& argv) {
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    const double t = time_command(argv);
    if (t < 0) throw std::runtime_error("a timed run of " + argv[0] + " failed");
    wall.push_back(t);
    cpu.push_back(last_cpu_ms);
  }
  return {summarise(wall), summarise(cpu)};
}

template <class Fn>
Stats time_runs(int runs, Fn&& fn) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const double t = fn();
    if (t < 0) throw std::runtime_error("a timed run failed");
    times.push_back(t);
  }
  return summarise(times);
}

void print(const std::string& what, const ProcessStats& s, int runs) {
  std::cout << fmt::format(
      "{:<44} median {:8.1f} ms  p95 {:8.1f}  min {:8.1f}  max {:8.1f}  ({} runs; CPU of the "
      "process: median {:.1f} ms)\n",
      what, s.wall.median, s.wall.p95, s.wall.min, s.wall.max, runs, s.cpu.median);
}

void print(const std::string& what, const Stats& s, int runs) {
  std::cout << fmt::format(
      "{:<44} median {:8.1f} ms  p95 {:8.1f}  min {:8.1f}  max {:8.1f}  ({} runs)\n", what,
      s.median, s.p95, s.min, s.max, runs);
}

// The counts as the original (migration 0001) view took them: a full count per status.
constexpr const char* kBaselineSql = R"(
SELECT
    (SELECT count(*) FROM timewarp.items WHERE status = 'NEW' AND not_before <= now()),
    (SELECT count(*) FROM timewarp.items WHERE status = 'NEW' AND not_before > now()),
    (SELECT count(*) FROM timewarp.items WHERE status = 'DISPATCHED'),
    (SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'),
    (SELECT count(*) FROM timewarp.items WHERE status = 'FAILED'),
    now() - (SELECT min(enqueued_at) FROM timewarp.items WHERE status = 'NEW' AND not_before <= now()),
    (SELECT min(not_before) FROM timewarp.items WHERE status = 'NEW' AND not_before > now()),
    (SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED' AND finished_at > now() - interval '1 minute'),
    (SELECT count(*) FROM timewarp.items WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour'))";

constexpr std::int64_t kRecent = 30'000;  // completions in the last minute (500/s)

// Adds kRecent completions spread over the last 30 seconds, just before the timing, so they
// are still "in the last minute" while it runs (and, like real ones, not yet vacuumed).
void add_recent_completions(tw::db::Connection& conn) {
  conn.query(
      R"(INSERT INTO timewarp.items (op, path, source_root, status, finished_at, archive_bytes, cpu_us)
                SELECT 'UPDATE', '/srv/data/recent/file-' || g, '/srv/data', 'COMPLETED',
                       now() - interval '30 seconds' * g / $1::float8, 1000, 100
                  FROM generate_series(1, $1::bigint) g)",
      kRecent);
}

// Fills timewarp.items with `rows` items in the shape of a busy installation.
void fill(tw::db::Connection& conn, std::int64_t rows) {
  // The shape: a backlog of 100k claimable, 10k delayed, 1k dispatched; 5k FAILED (1k in
  // the last hour); 30k completed in the last minute; the rest COMPLETED over 30 days.
  const std::int64_t claimable = 100'000, delayed = 10'000, dispatched = 1'000, failed = 5'000,
                     recent = kRecent;
  const std::int64_t completed = rows - claimable - delayed - dispatched - failed - recent;
  std::cout << fmt::format(
      "filling {} rows: {} completed (+{} in the last minute), {} claimable, "
      "{} delayed, {} dispatched, {} failed\n",
      rows, completed, recent, claimable, delayed, dispatched, failed);
  const auto fill_start = Clock::now();
  const std::int64_t chunk = 1'000'000;
  for (std::int64_t from = 1; from <= completed; from += chunk) {
    const std::int64_t to = std::min(completed, from + chunk - 1);
    conn.query(R"(INSERT INTO timewarp.items (op, path, source_root, status, size, enqueued_at,
                                              not_before, dispatched_at, started_at, finished_at,
                                              archive_bytes, cpu_us, scheduler_id, batch_id)
                  SELECT 'UPDATE', '/srv/data/d' || (g % 5000) || '/file-' || g, '/srv/data', 'COMPLETED',
                         g % 100000, t - interval '2 seconds', t - interval '2 seconds',
                         t - interval '1 second', t - interval '1 second', t,
                         g % 50000, g % 3000, 1 + g % 2, g / 100
                    FROM (SELECT g, now() - interval '30 days' * ($3::float8 - g) / $3::float8 AS t
                            FROM generate_series($1::bigint, $2::bigint) g) s)",
               from, to, completed);
    std::cout << fmt::format("  {:>10} rows after {:.0f} s\n", to, ms_since(fill_start) / 1000);
  }
  conn.query(
      R"(INSERT INTO timewarp.items (op, path, source_root, status, attempts, last_error, finished_at)
                SELECT 'UPDATE', '/srv/data/bad/file-' || g, '/srv/data', 'FAILED', 5,
                       'permission denied: /srv/data/bad/file-' || g,
                       CASE WHEN g <= 1000 THEN now() - interval '30 minutes' ELSE now() - interval '2 days' END
                  FROM generate_series(1, $1::bigint) g)",
      failed);
  conn.query(
      R"(INSERT INTO timewarp.items (op, path, source_root, status, enqueued_at, not_before, attempts, last_error)
                SELECT 'UPDATE', '/srv/data/busy/file-' || g, '/srv/data', 'NEW', now() - interval '3 hours',
                       now() + interval '10 minutes', 2, 'file changed while read'
                  FROM generate_series(1, $1::bigint) g)",
      delayed);
  conn.query(R"(INSERT INTO timewarp.items (op, path, source_root, status, enqueued_at)
                SELECT 'UPDATE', '/srv/data/new/file-' || g, '/srv/data', 'NEW',
                       now() - interval '20 minutes' + interval '1 millisecond' * g
                  FROM generate_series(1, $1::bigint) g)",
             claimable + dispatched);
  conn.exec(R"(INSERT INTO timewarp.schedulers (host, pid, strategy, batch_size, archivers,
                                                busy_consumers, idle_consumers, busy_high_water,
                                                batch_queue_length, batch_queue_high_water, items_done)
               VALUES ('bench-host-a', 101, 'fifo', 1000, 8, 8, 0, 8, 900, 1000, 5000000),
                      ('bench-host-b', 202, 'fair', 1000, 8, 7, 1, 8, 400, 1000, 4800000))");
  conn.query(
      R"(WITH d AS (SELECT id FROM timewarp.items WHERE status = 'NEW' AND not_before <= now()
                            ORDER BY id LIMIT $1)
                UPDATE timewarp.items i SET status = 'DISPATCHED', scheduler_id = 1 + i.id % 2,
                       dispatched_at = now(), lease_until = now() + interval '1 hour'
                  FROM d WHERE i.id = d.id)",
      dispatched);
  std::cout << fmt::format("filled in {:.0f} s\n", ms_since(fill_start) / 1000) << std::flush;
}

}  // namespace

int main(int argc, char** argv) {
  std::string admin =
      std::getenv("TIMEWARP_TEST_DATABASE") ? std::getenv("TIMEWARP_TEST_DATABASE") : "";
  std::int64_t rows = 10'000'000;
  int runs = 20;
  std::int64_t prune_rows = 0;
  bool keep = false;
  std::string reuse;
  CLI::App app{"timewarp-bench-status: times `timewarp status` on a queue of --rows items"};
  app.add_option("--admin", admin,
                 "maintenance database conninfo (default $TIMEWARP_TEST_DATABASE)");
  app.add_option("--rows", rows, "items in the queue")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{100000}, std::int64_t{1} << 34));
  app.add_option("--runs", runs, "timed runs per figure")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--prune-rows", prune_rows,
                 "also time pruning about this many old COMPLETED items (0: no)")
      ->capture_default_str();
  app.add_flag("--keep", keep, "keep the database afterwards");
  app.add_option("--reuse", reuse,
                 "time the queue of this database (kept by --keep) instead of filling one");
  CLI11_PARSE(app, argc, argv);
  if (admin.empty()) {
    std::cerr << "timewarp-bench-status: give --admin CONNINFO or set TIMEWARP_TEST_DATABASE\n";
    return 2;
  }

  const std::string name = reuse.empty() ? fmt::format("tw_bench_status_{}", ::getpid()) : reuse;
  if (!reuse.empty()) keep = true;
  try {
    if (reuse.empty()) {
      tw::db::Connection conn(admin);
      conn.exec("CREATE DATABASE " + name);
    }
    const std::string conninfo = admin + " dbname=" + name;
    tw::db::Connection conn(conninfo);
    tw::db::migrate(conn);
    conn.exec("SET synchronous_commit = off");

    if (reuse.empty()) {
      fill(conn, rows);
    } else {
      std::cout << "reusing the queue of database " << name << "\n";
    }
    std::cout << "VACUUM ANALYZE ...\n";
    const auto vacuum_start = Clock::now();
    conn.exec("VACUUM ANALYZE timewarp.items");
    std::cout << fmt::format(
        "vacuumed in {:.0f} s; table {} ({} with indexes)\n", ms_since(vacuum_start) / 1000,
        conn.exec("SELECT pg_size_pretty(pg_table_size('timewarp.items'))").text(0, 0),
        conn.exec("SELECT pg_size_pretty(pg_total_relation_size('timewarp.items'))").text(0, 0));

    add_recent_completions(conn);
    const std::string db_flag = "--database=" + conninfo;
    const std::string cli = TW_CLI_EXE;
    time_command({cli, db_flag, "status"});  // warm the cache once
    const auto text = time_process(runs, {cli, db_flag, "status"});
    const auto json = time_process(runs, {cli, db_flag, "status", "--json"});
    const auto view = time_runs(runs, [&] {
      const auto start = Clock::now();
      conn.exec("SELECT * FROM timewarp.queue_status");
      return ms_since(start);
    });
    // Floors, from the same run: starting the program, and connecting for one query.
    const auto start_only = time_process(runs, {cli, "--help"});
    const auto connect_only = time_runs(runs, [&] {
      const auto start = Clock::now();
      tw::db::Connection fresh(conninfo);
      fresh.exec("SELECT 1");
      return ms_since(start);
    });
    const int baseline_runs = std::min(runs, 5);
    const auto baseline = time_runs(baseline_runs, [&] {
      const auto start = Clock::now();
      conn.exec(kBaselineSql);
      return ms_since(start);
    });
    std::cout << fmt::format("\n{} rows in timewarp.items\n",
                             conn.exec("SELECT count(*) FROM timewarp.items").text(0, 0));
    print("timewarp status (whole process)", text, runs);
    print("timewarp status --json (whole process)", json, runs);
    print("SELECT * FROM timewarp.queue_status (SQL)", view, runs);
    print("baseline: full counts, as the 0001 view (SQL)", baseline, baseline_runs);
    print("floor: timewarp --help (process start)", start_only, runs);
    print("floor: connect + SELECT 1 (in process)", connect_only, runs);

    if (prune_rows > 0) {
      // Old enough that about prune_rows of the oldest completed items qualify.
      const double age = conn.query(R"(SELECT extract(epoch FROM now() - finished_at)::float8
                                         FROM timewarp.items WHERE status = 'COMPLETED'
                                        ORDER BY finished_at OFFSET $1 LIMIT 1)",
                                    prune_rows)
                             .float8(0, 0);
      const auto start = Clock::now();
      const auto removed = tw::db::prune_completed(conn, age, 5000);
      const double seconds = ms_since(start) / 1000;
      std::cout << fmt::format("{:<44} {} rows in {:.1f} s ({:.0f} rows/s, batches of 5000)\n",
                               "prune", removed, seconds, static_cast<double>(removed) / seconds);
      const auto after = time_process(runs, {cli, db_flag, "status"});
      print("timewarp status after prune", after, runs);
    }
  } catch (const std::exception& e) {
    std::cerr << "timewarp-bench-status: " << e.what() << "\n";
    if (!keep) {
      try {
        tw::db::Connection(admin).exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      } catch (...) {
      }
    }
    return 1;
  }
  if (keep) {
    std::cout << "kept database " << name << "\n";
  } else {
    tw::db::Connection(admin).exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
  }
  return 0;
}
