#include "monitor/monitor.hpp"

#include <poll.h>
#include <sys/signalfd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "db/queue.hpp"

namespace tw::monitor {
namespace {

constexpr auto kFirstRestartDelay = std::chrono::milliseconds(200);
constexpr auto kMaxRestartDelay = std::chrono::milliseconds(30000);
constexpr auto kMaxDbBackoff = std::chrono::milliseconds(10000);
constexpr auto kStopWait = std::chrono::seconds(60);
// A scheduler that ran this long before dying is considered healthy: backoff resets.
constexpr auto kHealthyRun = std::chrono::seconds(30);

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void Monitor::block_signals() {
  const sigset_t set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Monitor::Monitor(Config config, std::shared_ptr<Launcher> launcher)
    : config_(std::move(config)), launcher_(std::move(launcher)) {
  const sigset_t set = handled_signals();
  signal_fd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_) throw std::runtime_error(fmt::format("signalfd: {}", std::strerror(errno)));
}

Monitor::~Monitor() = default;

bool Monitor::ensure_database() {
  if (conn_ && conn_->healthy()) return true;
  conn_.reset();
  if (reconnect_at_ && Clock::now() < *reconnect_at_) return false;
  try {
    conn_ = std::make_unique<db::Connection>(config_.database);
    conn_->listen("timewarp_items");
    reconnect_at_.reset();
    db_backoff_ = std::chrono::milliseconds(100);
    spdlog::info("listening for queue changes ({})", conn_->describe());
    return true;
  } catch (const db::DbError& e) {
    conn_.reset();
    spdlog::warn("database: {}; retrying in {} ms", e.what(), db_backoff_.count());
    reconnect_at_ = Clock::now() + db_backoff_;
    db_backoff_ = std::min(db_backoff_ * 2, kMaxDbBackoff);
    return false;
  }
}

void Monitor::send(const std::string& line) {
  if (!scheduler_) return;
  if (!scheduler_->write_line(line)) spdlog::warn("scheduler does not read its signals");
}

// Asks the queue whether there is claimable work and when the next delayed item falls
// due, then lets the handshake decide whether the scheduler needs a READY.
void Monitor::check_queue() {
  if (!scheduler_ || stopping_ || !ensure_database()) return;
  try {
    db::Queue queue(*conn_);
    const auto counts_claimable = queue.has_claimable();
    auto next = conn_->query(
        "SELECT extract(epoch FROM min(not_before) - now())::float8 FROM timewarp.items "
        "WHERE status = 'NEW' AND not_before > now()");
    retry_due_.reset();
    if (!next.is_null(0, 0)) {
      const auto seconds = std::max(0.0, next.float8(0, 0));
      retry_due_ = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000) + 1);
    }
    if (handshake_.on_possible_work(counts_claimable)) send("READY");
  } catch (const db::DbError& e) {
    spdlog::warn("checking the queue failed: {}", e.what());
    conn_.reset();
  }
}

void Monitor::start_scheduler() {
  LaunchSpec spec;
  spec.executable = config_.scheduler_exe.empty() ? sibling_executable("timewarp-scheduler")
                                                  : config_.scheduler_exe;
  spec.args = config_to_args(config_);
  if (!config_.database.empty()) spec.env.emplace_back(kDatabaseEnv, config_.database);
  try {
    scheduler_ = launcher_->launch(spec);
  } catch (const std::exception& e) {
    restart_backoff_ = std::clamp(restart_backoff_ * 2, kFirstRestartDelay, kMaxRestartDelay);
    spdlog::error("{}; retrying in {} ms", e.what(), restart_backoff_.count());
    restart_at_ = Clock::now() + restart_backoff_;
    return;
  }
  restart_at_.reset();
  scheduler_started_ = Clock::now();
  handshake_.on_scheduler_restarted();
  spdlog::info("scheduler started (pid {})", scheduler_->pid());
  check_queue();
}

void Monitor::on_scheduler_exit(int status) {
  spdlog::error("scheduler (pid {}) exited with status {}", scheduler_->pid(), status);
  scheduler_.reset();
  if (stopping_) return;
  if (Clock::now() - scheduler_started_ > kHealthyRun) restart_backoff_ = std::chrono::milliseconds(0);
  restart_backoff_ = std::clamp(restart_backoff_ * 2, kFirstRestartDelay, kMaxRestartDelay);
  spdlog::warn("restarting the scheduler in {} ms", restart_backoff_.count());
  restart_at_ = Clock::now() + restart_backoff_;
}

void Monitor::on_scheduler_output() {
  while (scheduler_) {
    std::string line;
    const auto status = scheduler_->read_line(line, std::chrono::milliseconds(0));
    if (status == ChildProcess::ReadStatus::Timeout) return;
    if (status == ChildProcess::ReadStatus::Eof) {
      const auto exit_status = scheduler_->wait_exit(std::chrono::seconds(5));
      on_scheduler_exit(exit_status.value_or(scheduler_->terminate(std::chrono::seconds(1))));
      return;
    }
    if (status == ChildProcess::ReadStatus::Overlong) {
      spdlog::warn("ignoring an over-long line from the scheduler");
      continue;
    }
    if (line != "READY") {
      spdlog::warn("ignoring unknown line from the scheduler: '{}'", line.substr(0, 80));
      continue;
    }
    spdlog::debug("scheduler is READY (drained)");
    handshake_.on_scheduler_ready(false);  // clears the flag; the look below decides
    check_queue();
  }
}

std::optional<Monitor::Clock::time_point> Monitor::next_wakeup() const {
  std::optional<Clock::time_point> next;
  const auto consider = [&next](const std::optional<Clock::time_point>& t) {
    if (t && (!next || *t < *next)) next = t;
  };
  if (handshake_.wants_check()) consider(retry_due_);
  consider(restart_at_);
  consider(reconnect_at_);
  return next;
}

void Monitor::stop_scheduler() {
  stopping_ = true;
  if (!scheduler_) return;
  spdlog::info("stopping: sending STOP to the scheduler");
  send("STOP");
  scheduler_->close_stdin();
  const auto status = scheduler_->wait_exit(kStopWait);
  if (status) {
    spdlog::info("scheduler stopped (status {})", *status);
  } else {
    spdlog::warn("scheduler did not stop within {} s; terminating it",
                 std::chrono::duration_cast<std::chrono::seconds>(kStopWait).count());
    scheduler_->terminate(std::chrono::seconds(5));
  }
  scheduler_.reset();
}

int Monitor::run() {
  ensure_database();
  start_scheduler();
  while (true) {
    std::vector<pollfd> fds;
    fds.push_back({signal_fd_.get(), POLLIN, 0});
    if (conn_) fds.push_back({conn_->socket(), POLLIN, 0});
    const std::size_t db_index = conn_ ? 1 : 0;
    const std::size_t sched_index = fds.size();
    if (scheduler_) fds.push_back({scheduler_->stdout_fd(), POLLIN, 0});

    int timeout_ms = -1;
    if (const auto wake = next_wakeup()) {
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now()).count(), 0, 3600000));
    }
    if (scheduler_ && scheduler_->has_buffered_line()) timeout_ms = 0;
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));

    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      while (::read(signal_fd_.get(), &info, sizeof info) == sizeof info) {
        if (info.ssi_signo == SIGHUP) {
          spdlog::info("SIGHUP: configuration reload is not supported yet; ignoring");
          continue;
        }
        spdlog::info("{} received", info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
        stop_scheduler();
        return 0;
      }
    }
    if (db_index && conn_ && (fds[db_index].revents & (POLLIN | POLLERR | POLLHUP))) {
      try {
        const auto notes = conn_->consume_notifications();
        if (!notes.empty() && handshake_.wants_check()) check_queue();
      } catch (const db::DbError& e) {
        spdlog::warn("{}", e.what());
        conn_.reset();
      }
    }
    if (scheduler_ && (sched_index < fds.size()) &&
        ((fds[sched_index].revents & (POLLIN | POLLHUP | POLLERR)) || scheduler_->has_buffered_line())) {
      on_scheduler_output();
    }
    const auto now = Clock::now();
    if (!conn_ && reconnect_at_ && now >= *reconnect_at_) {
      if (ensure_database()) check_queue();  // catch up on what happened while away
    }
    if (!scheduler_ && restart_at_ && now >= *restart_at_) start_scheduler();
    if (retry_due_ && now >= *retry_due_ && handshake_.wants_check()) check_queue();
  }
}

}  // namespace tw::monitor
