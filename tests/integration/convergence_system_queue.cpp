// The database side of System: its own connection, the quiet-moment questions about the
// queue and the monitor's catch-up, and the second scheduler (which is driven by what the
// queue says it holds).
#include <signal.h>

#include <chrono>

#include <fmt/format.h>

#include "integration/convergence_system.hpp"
#include "support/test_support.hpp"

namespace tw::test::convergence {

using namespace std::chrono_literals;

db::Connection* System::connection() {
  if (conn_ && conn_->healthy()) return conn_.get();
  conn_.reset();
  try {
    conn_ = std::make_unique<db::Connection>(settings_.conninfo);
  } catch (const std::exception&) {
    return nullptr;
  }
  return conn_.get();
}

std::optional<std::int64_t> System::scalar(const std::string& sql,
                                           const std::vector<std::string>& params) {
  db::Connection* conn = connection();
  if (!conn) return std::nullopt;
  try {
    std::vector<db::Param> values(params.begin(), params.end());
    auto r = conn->exec(sql, values);
    if (r.rows() == 0 || r.is_null(0, 0)) return std::nullopt;
    return r.int64(0, 0);
  } catch (const std::exception&) {
    conn_.reset();
    return std::nullopt;
  }
}

bool System::start_second_scheduler() {
  if (second_) return false;
  std::vector<std::string> args = {
      "--backup-root=" + archive(),
      "--archivers=1",
      "--batch-size=10",
      fmt::format("--lease-time={}", settings_.second_lease_time),
      "--heartbeat-interval=0.2",
      "--flush-interval=0.01",
      "--retry-base-delay=0.05",
      "--retry-max-delay=0.5",
      "--max-attempts=100",
      "--log-level=info",
  };
  for (const auto& a : monitor_args()) {
    if (a.rfind("--archiver-", 0) == 0) args.push_back(a);
  }
  second_ = launch_logged(scheduler_exe(), args, settings_.work + "/second-scheduler.log",
                          {{"TIMEWARP_DATABASE", settings_.conninfo}});
  const pid_t pid = second_->pid();
  log_.add("fault", fmt::format("second scheduler started (pid {}, lease {} s)", pid,
                                settings_.second_lease_time));
  std::int64_t held = 0;
  auto last_ready = std::chrono::steady_clock::now() - 1s;
  const bool holds = wait_until(
      [&] {
        if (std::chrono::steady_clock::now() - last_ready > 200ms) {
          second_->write_line("READY");
          last_ready = std::chrono::steady_clock::now();
        }
        if (second_id_ == 0) {
          second_id_ = scalar("SELECT max(id) FROM timewarp.schedulers WHERE pid = $1",
                              {std::to_string(pid)})
                           .value_or(0);
          if (second_id_ == 0) return false;
        }
        held = scalar(
                   "SELECT count(*) FROM timewarp.items WHERE scheduler_id = $1 AND status = "
                   "'DISPATCHED'",
                   {std::to_string(second_id_)})
                   .value_or(0);
        return held > 0;
      },
      4s, 2ms);
  if (holds) {
    ::kill(pid, SIGSTOP);
    log_.add("fault",
             fmt::format("second scheduler (pid {}) SIGSTOPped holding {} items", pid, held));
    return true;
  }
  second_->write_line("STOP");
  const auto status = second_->wait_exit(20s);
  const int code = status ? *status : second_->terminate(1s);
  log_.add("fault",
           fmt::format("second scheduler (pid {}) held nothing; stopped (status {})", pid, code));
  second_.reset();
  second_id_ = 0;
  return false;
}

void System::tick_second_scheduler() {
  if (!second_) return;
  const auto leased = scalar(
      "SELECT count(*) FROM timewarp.items WHERE scheduler_id = $1 AND status = 'DISPATCHED' AND "
      "lease_until > now()",
      {std::to_string(second_id_)});
  if (!leased || *leased > 0) return;
  const pid_t pid = second_->pid();
  ::kill(pid, SIGKILL);
  second_->wait_exit(10s);
  second_.reset();
  second_id_ = 0;
  log_.add("fault", fmt::format("second scheduler (pid {}) SIGKILLed, its leases expired", pid));
}

System::QueueState System::queue_state() {
  QueueState s;
  const auto open =
      scalar("SELECT count(*) FROM timewarp.items WHERE status IN ('NEW', 'DISPATCHED')", {});
  const auto failed = scalar("SELECT count(*) FROM timewarp.items WHERE status = 'FAILED'", {});
  std::optional<std::int64_t> caught_up;
  if (monitor_) {
    // Caught up, and connected again since the server last started: a monitor that lost the
    // database holds the changes it saw until it reconnects (after a growing backoff), so
    // until then an empty queue does not mean that nothing waits.
    caught_up = scalar(
        "SELECT count(*) FROM timewarp.monitors WHERE pid = $1 AND stopped_at IS NULL AND "
        "catchup_finished_at IS NOT NULL AND heartbeat_at > pg_postmaster_start_time()",
        {std::to_string(monitor_->pid())});
  }
  s.known = open && failed && caught_up;
  s.open = open.value_or(-1);
  s.failed = failed.value_or(-1);
  s.catchup_done = caught_up.value_or(0) > 0;
  return s;
}

std::string System::describe_queue() {
  db::Connection* conn = connection();
  if (!conn) return "  (the database cannot be reached)\n";
  try {
    auto r = conn->exec(
        "SELECT id, status, op, path, coalesce(dest_path, ''), attempts, "
        "coalesce(last_error, ''), coalesce(scheduler_id::text, ''), "
        "coalesce(to_char(not_before, 'HH24:MI:SS.MS'), '') FROM timewarp.items "
        "WHERE status IN ('NEW', 'DISPATCHED', 'FAILED') ORDER BY id LIMIT 40");
    std::string out;
    for (int i = 0; i < r.rows(); ++i) {
      out += fmt::format("  item {} {} {} {}{} attempts={} scheduler={} not_before={} {}\n",
                         r.text(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3),
                         r.text(i, 4).empty() ? "" : " -> " + std::string(r.text(i, 4)),
                         r.text(i, 5), r.text(i, 7), r.text(i, 8), r.text(i, 6));
    }
    return out.empty() ? "  (none)\n" : out;
  } catch (const std::exception& e) {
    conn_.reset();
    return fmt::format("  (cannot read the queue: {})\n", e.what());
  }
}

std::optional<std::int64_t> System::last_item_id() {
  return scalar("SELECT coalesce(max(id), 0) FROM timewarp.items", {});
}

std::string System::describe_items_after(std::int64_t id) {
  db::Connection* conn = connection();
  if (!conn) return "  (the database cannot be reached)\n";
  try {
    auto r = conn->query(
        "SELECT id, op, path, coalesce(dest_path, ''), status FROM timewarp.items WHERE id > $1 "
        "ORDER BY id LIMIT 20",
        id);
    std::string out;
    for (int i = 0; i < r.rows(); ++i) {
      out +=
          fmt::format("  item {} {} {}{} ({})\n", r.text(i, 0), r.text(i, 1), r.text(i, 2),
                      r.text(i, 3).empty() ? "" : " -> " + std::string(r.text(i, 3)), r.text(i, 4));
    }
    return out;
  } catch (const std::exception& e) {
    conn_.reset();
    return fmt::format("  (cannot read the queue: {})\n", e.what());
  }
}

}  // namespace tw::test::convergence
