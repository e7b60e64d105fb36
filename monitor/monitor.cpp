#include "monitor/monitor.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/archivers.hpp"
#include "common/escape.hpp"
#include "common/host.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"
#include "db/monitors.hpp"
#include "db/queue.hpp"

namespace tw::monitor {
namespace {

constexpr auto kFirstRestartDelay = std::chrono::milliseconds(200);
constexpr auto kMaxRestartDelay = std::chrono::milliseconds(30000);
constexpr auto kFirstDbDelay = std::chrono::milliseconds(100);
constexpr auto kMaxDbBackoff = std::chrono::milliseconds(10000);
constexpr std::string_view kQueueing = "queueing changes";
constexpr auto kStopWait = std::chrono::seconds(60);
// How long a stopping monitor waits for its last shipping run (with kStopWait, within the
// service's TimeoutStopSec of 120 s).
constexpr auto kFinalShipWait = std::chrono::seconds(30);
// How often the monitor reads its archive's shipping backlog for its row between runs (and
// after each run): the database's status of every host is at most this much behind.
constexpr auto kShippingReread = std::chrono::seconds(60);
// A scheduler that ran this long before dying is considered healthy: backoff resets.
constexpr auto kHealthyRun = std::chrono::seconds(30);
// Items per INSERT statement.
constexpr std::size_t kInsertChunk = 10000;
// A window holding this many changes goes to the database at once, without waiting for
// event_delay: a catch-up of a large tree reaches the scheduler in steps of this size while
// the scan goes on, instead of all after its last file.
constexpr std::size_t kFullWindow = 1000;
// ... after a first step of this size, doubling at each full window: the archivers start on
// a burst (a first backup's catch-up) as soon as its first hundred changes are found.
constexpr std::size_t kFirstWindow = 100;

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// The keys a SIGHUP applies without a restart.
// clang-format off
const std::set<std::string_view> kReloadedKeys = {
    "archivers", "event_delay", "log_level",
    "keep_within", "keep_hourly", "keep_daily", "keep_weekly", "keep_monthly", "keep_yearly",
    "retention_timezone", "retention_folder", "retention_interval",
    "store_endpoint", "store_bucket", "store_prefix", "store_region", "store_access_key",
    "store_secret_key", "store_credentials_file", "ship_interval", "local_packs_size",
    "cache_dir", "cache_size"};
// clang-format on

// The keys of the configuration whose values differ between `a` and `b`, but `skip`.
std::vector<std::string> changed_keys(const Config& a, const Config& b,
                                      const std::set<std::string_view>& skip) {
  std::vector<std::string> keys;
  for (const ConfigKey& key : config_keys()) {
    if (!skip.contains(key.name) && key_value(key, a) != key_value(key, b)) {
      keys.emplace_back(key.name);
    }
  }
  return keys;
}

}  // namespace

PendingLookup make_pending_lookup(std::string conninfo, std::string host) {
  auto session = std::make_shared<db::Session>(
      db::Session::Options::of(std::move(conninfo), "queue look-up", kMaxDbBackoff));
  return [session, host](const std::vector<std::string>& roots) -> std::optional<PendingSet> {
    std::vector<std::string> escaped;
    for (const auto& root : roots) escaped.push_back(escape_bytes(root));
    const auto waiting = session->run(
        "looking up the queue's waiting work",
        [&](db::Connection& conn) { return db::Queue(conn, host).waiting_beneath(escaped); });
    if (!waiting) return std::nullopt;
    PendingSet pending;
    for (const auto& [op_text, stored] : *waiting) {
      auto path = unescape_bytes(stored);
      if (!path) continue;
      const auto op = parse_op(op_text);
      pending.paths[*path] |= op == Op::Update || op == Op::Scan     ? PendingSet::kUpdate
                              : (op == Op::Delete || op == Op::Move) ? PendingSet::kDelete
                                                                     : 0u;
    }
    return pending;
  };
}

void Monitor::block_signals() {
  const sigset_t set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Monitor::Monitor(Config config, std::shared_ptr<Launcher> launcher, Reload reload,
                 std::unique_ptr<EventSource> source)
    : launcher_(std::move(launcher)),
      reload_(std::move(reload)),
      filter_(Filter::from_config(config)),
      config_(std::move(config)),
      signal_fd_(),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      archive_(config_.backup_root),
      session_([this] {
        auto options = db::Session::Options::of(config_.database, "monitor", kMaxDbBackoff);
        options.on_connect = [this](db::Connection& conn) { on_connect(conn); };
        return options;
      }()),
      batcher_({seconds_ms(config_.event_delay), kFullWindow, kFirstWindow},
               [this] {
                 const std::uint64_t one = 1;
                 [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
               }),
      retention_(launcher_, config_.timewarp_exe),
      shipping_(launcher_, config_.timewarp_exe) {
  const sigset_t set = handled_signals();
  signal_fd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_) throw std::runtime_error(fmt::format("signalfd: {}", std::strerror(errno)));
  if (!wake_fd_) throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
  if (!source) source = std::make_unique<InotifySource>();
  Watcher::Options watch_options;
  watch_options.rescan_interval = seconds_ms(config_.rescan_interval);
  watch_options.unclosed_quiet =
      std::max(std::chrono::milliseconds(100), 2 * seconds_ms(config_.event_delay));
  watcher_ = std::make_unique<Watcher>(
      watch_options, std::move(source), filter_, archive_, batcher_,
      make_pending_lookup(config_.database, host_id(config_)), [this] {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
      });
  for (std::size_t i = 0; i < filter_.roots().size(); ++i) {
    const std::string& root = filter_.roots()[i];
    const std::string given = absolute_path(config_.source_dirs.at(i)).native();
    if (given == root) {
      spdlog::info("watching {}", shown_path(root));
    } else {
      spdlog::info("watching {} (given as {}: links are resolved once, at start)", shown_path(root),
                   shown_path(given));
    }
  }
}

Monitor::~Monitor() {
  if (watcher_) watcher_->stop();
}

// Set-up of every new listener connection: LISTEN, the monitor's row (again, if it is
// gone), the run-time setting made while nobody listened, and one look at the queue for the
// work added meanwhile. Runs inside the session's connect: it only reads and records; the
// main loop acts on what it found.
void Monitor::on_connect(db::Connection& conn) {
  conn.listen("timewarp_items");
  conn.listen("timewarp_control");
  spdlog::info("listening for queue changes ({})", conn.describe());
  if (monitor_id_ == 0 || !db::monitor_registered(conn, monitor_id_)) {
    std::vector<std::string> roots;
    for (const auto& root : filter_.roots()) roots.push_back(escape_bytes(root));
    const auto registered = db::register_monitor(
        conn, hostname(), host_id(config_), static_cast<int>(::getpid()), roots, config_.archivers);
    monitor_id_ = registered.id;
    // At start the configuration decides; later `timewarp archivers N` does.
    if (!control_applied_at_) control_applied_at_ = registered.registered_at;
  }
  read_control(conn);     // an instruction given while we were away
  recheck_queue_ = true;  // and work added while nobody listened
}

bool Monitor::ensure_database() {
  if (session_.connected()) return true;
  if (session_.wait() > std::chrono::milliseconds(0)) return false;
  try {
    session_.connect_now();
  } catch (const db::DbError& e) {
    spdlog::warn("database: {}; reconnecting in {} ms", e.what(), session_.wait().count());
    return false;
  }
  apply_control();
  return true;
}

void Monitor::send(const std::string& line) {
  if (!scheduler_) return;
  if (!scheduler_->write_line(line)) spdlog::warn("scheduler does not read its signals");
}

// Asks the queue whether there is claimable work and when the next delayed item falls
// due, then lets the handshake decide whether the scheduler needs a READY. `periodic`: the
// look every heartbeat while the scheduler is idle, a safety net for a wake-up that went
// missing (it should find nothing the notifications and retry timer did not announce).
void Monitor::check_queue(bool periodic) {
  if (!scheduler_ || stopping_ || !ensure_database()) return;
  const auto look = session_.run("checking the queue", [this](db::Connection& conn) {
    db::Queue queue(conn, host_id(config_));
    const bool claimable = queue.has_claimable();
    return std::pair{claimable, queue.next_delayed_in()};
  });
  if (!look) return;
  const auto& [claimable, next_in] = *look;
  retry_due_.reset();
  if (next_in) {
    const auto seconds = std::max(0.0, *next_in);
    retry_due_ =
        Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000) + 1);
  }
  if (handshake_.on_possible_work(claimable)) {
    if (periodic) {
      spdlog::info("the periodic look at the queue found claimable items; waking the scheduler");
    }
    send("READY");
  }
}

// Inserts the changes gathered in the batcher's window, in one round trip.
void Monitor::queue_changes() {
  auto changes = batcher_.take();
  if (changes.empty()) return;
  std::size_t done = 0;
  if (ensure_database()) {
    session_.run(kQueueing, [&](db::Connection& conn) {
      db::Queue queue(conn, host_id(config_));
      while (done < changes.size()) {
        const std::size_t end = std::min(changes.size(), done + kInsertChunk);
        std::vector<db::NewItem> items;
        items.reserve(end - done);
        for (std::size_t i = done; i < end; ++i) {
          const Change& c = changes[i];
          db::NewItem item;
          item.op = c.op;
          item.path = escape_bytes(c.path);
          if (c.op == Op::Move) item.dest_path = escape_bytes(c.dest);
          item.source_root = escape_bytes(filter_.root_of(c.op == Op::Move ? c.dest : c.path));
          item.priority = c.priority;
          item.size = c.size;
          item.mtime = c.mtime;
          items.push_back(std::move(item));
        }
        queue.enqueue(items);
        done = end;
      }
    });
  }
  if (done < changes.size()) {
    // Kept, in order, to be tried again when the session allows.
    spdlog::debug("{} changes kept to queue again", changes.size() - done);
    std::vector<Change> rest(
        std::make_move_iterator(changes.begin() + static_cast<std::ptrdiff_t>(done)),
        std::make_move_iterator(changes.end()));
    batcher_.restore(std::move(rest),
                     std::max(session_.ready_at(kQueueing), Clock::now() + kFirstDbDelay));
  }
  items_queued_ += static_cast<std::int64_t>(done);
  spdlog::debug("queued {} changes", done);
  if (done > 0 && scheduler_ && !stopping_ && handshake_.on_possible_work(true)) send("READY");
}

void Monitor::heartbeat(bool stopping) {
  next_heartbeat_ = Clock::now() + seconds_ms(std::max(0.05, config_.heartbeat_interval));
  if (!ensure_database() || monitor_id_ == 0) return;
  const auto s = watcher_->stats();
  db::MonitorStats stats;
  stats.watches = s.watches;
  stats.unwatched = s.unwatched;
  stats.events = s.events;
  stats.changes = s.changes;
  stats.items_queued = items_queued_;
  stats.rescans = s.rescans;
  stats.archivers = config_.archivers;
  if (scheduler_) stats.scheduler_pid = scheduler_->pid();
  stats.scheduler_restarts = scheduler_restarts_;
  stats.catchup_finished = catchup_recorded_;
  stats.stopping = stopping;
  stats.database = session_.health();
  stats.shipping = shipping_figures_;
  session_.run("heartbeat",
               [&](db::Connection& conn) { db::monitor_heartbeat(conn, monitor_id_, stats); });
}

// `timewarp archivers N` writes timewarp.control and notifies timewarp_control: a setting
// newer than the one in force is kept for apply_control().
void Monitor::read_control(db::Connection& conn) {
  const auto setting = db::read_control(conn, "archivers");
  if (!setting || (control_applied_at_ && setting->set_at <= *control_applied_at_)) return;
  control_applied_at_ = setting->set_at;
  const auto n = parse_archivers(setting->value);
  if (!n) {
    spdlog::warn("ignoring timewarp.control archivers = '{}': a number from {} to {} is allowed",
                 shown_text(setting->value, 80), kMinArchivers, kMaxArchivers);
    return;
  }
  control_archivers_ = *n;
}

void Monitor::apply_control() {
  if (const auto n = std::exchange(control_archivers_, std::nullopt)) {
    set_archivers(*n, "timewarp archivers");
  }
}

void Monitor::set_archivers(int archivers, const std::string& why) {
  if (archivers == config_.archivers) {
    spdlog::info("{}: archivers stay {}", why, archivers);
    return;
  }
  spdlog::info("{}: archivers {} -> {}", why, config_.archivers, archivers);
  config_.archivers = archivers;  // also for a scheduler started later
  send(fmt::format("ARCHIVERS {}", archivers));
  heartbeat();
}

void Monitor::reload() {
  if (!reload_) {
    spdlog::info("SIGHUP: nothing to reload");
    return;
  }
  spdlog::info("SIGHUP: re-reading the configuration");
  const auto fresh = reload_();
  if (!fresh) {
    spdlog::error("SIGHUP: the configuration is not valid; keeping the one in force");
    return;
  }
  const auto restart_needed = changed_keys(config_, *fresh, kReloadedKeys);
  if (!restart_needed.empty()) {
    spdlog::warn("SIGHUP: {} changed; this takes a restart of timewarp-monitor",
                 fmt::join(restart_needed, ", "));
  }
  if (fresh->log_level != config_.log_level) {
    config_.log_level = fresh->log_level;
    spdlog::set_level(spdlog::level::from_str(config_.log_level));
    spdlog::info("SIGHUP: log level {}", config_.log_level);
  }
  if (fresh->event_delay != config_.event_delay) {
    config_.event_delay = fresh->event_delay;
    batcher_.set_delay(seconds_ms(config_.event_delay));
    spdlog::info("SIGHUP: event delay {} s", config_.event_delay);
  }
  reload_retention(*fresh);
  reload_shipping(*fresh);
  control_applied_at_ = epoch_seconds();
  set_archivers(fresh->archivers, "SIGHUP");
}

// The policy and the schedule of the next retention run take effect at once.
void Monitor::reload_retention(const Config& fresh) {
  const auto retention = [](auto& c) {
    return std::tie(c.keep_within, c.keep_hourly, c.keep_daily, c.keep_weekly, c.keep_monthly,
                    c.keep_yearly, c.retention_timezone, c.retention_folder, c.retention_interval);
  };
  if (retention(config_) == retention(fresh)) return;
  retention(config_) = retention(fresh);
  retention_.reschedule();
  spdlog::info("SIGHUP: retention policy and schedule updated (a run every {:g} s)",
               config_.retention_interval);
}

// The store and the schedule of the next shipping run take effect at once.
void Monitor::reload_shipping(const Config& fresh) {
  const auto shipping = [](auto& c) {
    return std::tie(c.store_endpoint, c.store_bucket, c.store_prefix, c.store_region,
                    c.store_access_key, c.store_secret_key, c.store_credentials_file,
                    c.ship_interval, c.local_packs_size, c.cache_dir, c.cache_size);
  };
  if (shipping(config_) == shipping(fresh)) return;
  shipping(config_) = shipping(fresh);
  shipping_.reschedule();
  read_shipping();
  spdlog::info("SIGHUP: pack store and shipping schedule updated");
}

void Monitor::read_shipping(const std::string& run_error) {
  ship_error_ = run_error;
  shipping_read_ = Clock::now();
  shipping_figures_ = read_shipping_figures(config_, run_error);
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
  if (Clock::now() - scheduler_started_ > kHealthyRun)
    restart_backoff_ = std::chrono::milliseconds(0);
  restart_backoff_ = std::clamp(restart_backoff_ * 2, kFirstRestartDelay, kMaxRestartDelay);
  ++scheduler_restarts_;
  spdlog::warn("restarting the scheduler in {} ms (restart {})", restart_backoff_.count(),
               scheduler_restarts_);
  restart_at_ = Clock::now() + restart_backoff_;
}

void Monitor::on_scheduler_output() {
  if (!scheduler_) return;
  const auto exited = drain_lines(*scheduler_, [this](std::optional<std::string> line) {
    if (!line) {
      spdlog::warn("ignoring an over-long line from the scheduler");
    } else if (*line != "READY") {
      spdlog::warn("ignoring unknown line from the scheduler: '{}'", line->substr(0, 80));
    } else {
      spdlog::debug("scheduler is READY (drained)");
      handshake_.on_scheduler_ready(false);  // clears the flag; the look below decides
      check_queue();
    }
  });
  if (exited) on_scheduler_exit(*exited);
}

std::optional<Monitor::Clock::time_point> Monitor::next_wakeup() const {
  std::optional<Clock::time_point> next;
  const auto consider = [&next](const std::optional<Clock::time_point>& t) {
    if (t && (!next || *t < *next)) next = t;
  };
  if (handshake_.wants_check()) consider(retry_due_);
  consider(restart_at_);
  if (!session_.connected()) consider(session_.ready_at());
  consider(batcher_.due());
  consider(next_heartbeat_);
  consider(retention_.due(config_));
  consider(shipping_.due(config_));
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

// Acts on the notifications received (LISTEN timewarp_items, timewarp_control) until none
// is left unread.
void Monitor::handle_notifications() {
  notes_unread_ = false;
  for (int round = 0; session_.connected(); ++round) {
    if (round == 8) {  // busy: serve the other descriptors, then come back at once
      notes_unread_ = true;
      return;
    }
    bool items = false, control = false;
    const auto read = session_.run("reading notifications", [&](db::Connection& conn) {
      const auto notes = conn.consume_notifications();
      for (const auto& note : notes) (note.channel == "timewarp_control" ? control : items) = true;
      if (control) read_control(conn);
      return !notes.empty();
    });
    if (!read || !*read) return;
    apply_control();
    if (items && handshake_.wants_check()) check_queue();
  }
}

// Stops watching, queues what was gathered, stops the scheduler, then ships what its
// archivers left unshipped.
void Monitor::shut_down() {
  retention_.stop();
  shipping_.stop();
  watcher_->stop();
  queue_changes();
  if (const auto left = batcher_.size(); left > 0) {
    spdlog::warn("{} changes could not be queued; the next start's catch-up finds them", left);
  }
  stop_scheduler();
  // The archivers have exited, their last packs sealed: shipped now, not at the next start.
  shipping_.final_run(config_, kFinalShipWait);
  if (!config_.store_endpoint.empty()) read_shipping(shipping_.take_ended().value_or(""));
  heartbeat(true);
}

int Monitor::run() {
  ensure_database();
  start_scheduler();
  watcher_->start();
  read_shipping();
  heartbeat();
  while (true) {
    std::vector<pollfd> fds;
    fds.push_back({signal_fd_.get(), POLLIN, 0});
    fds.push_back({wake_fd_.get(), POLLIN, 0});
    if (session_.connected()) fds.push_back({session_.socket(), POLLIN, 0});  // notifications
    const std::size_t sched_index = fds.size();
    if (scheduler_) fds.push_back({scheduler_->stdout_fd(), POLLIN, 0});
    std::array<BackgroundRuns*, 2> runs = {&retention_, &shipping_};
    std::array<std::optional<std::size_t>, 2> run_index{};  // in fds, when it runs
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (runs[i]->output_fd() < 0) continue;
      run_index[i] = fds.size();
      fds.push_back({runs[i]->output_fd(), POLLIN, 0});
    }

    int timeout_ms = -1;
    if (const auto wake = next_wakeup()) {
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now()).count(), 0, 3600000));
    }
    if ((scheduler_ && scheduler_->has_buffered_line()) || notes_unread_ ||
        retention_.has_buffered_line() || shipping_.has_buffered_line()) {
      timeout_ms = 0;
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));

    if (fds[0].revents & POLLIN) {
      if (const auto status = on_signals()) return *status;
    }
    if (fds[1].revents & POLLIN) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(wake_fd_.get(), &count, sizeof count);
    }
    if (scheduler_ && (sched_index < fds.size()) &&
        ((fds[sched_index].revents & (POLLIN | POLLHUP | POLLERR)) ||
         scheduler_->has_buffered_line())) {
      on_scheduler_output();
    }
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if ((run_index[i] && (fds[*run_index[i]].revents & (POLLIN | POLLHUP | POLLERR))) ||
          runs[i]->has_buffered_line()) {
        runs[i]->on_output();
      }
    }
    if (const auto run_error = shipping_.take_ended()) {
      read_shipping(*run_error);
      heartbeat();
    }
    if (const auto status = on_wakeup()) return *status;
  }
}

std::optional<int> Monitor::on_signals() {
  signalfd_siginfo info{};
  while (::read(signal_fd_.get(), &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGHUP) {
      reload();
      continue;
    }
    spdlog::info("{} received", info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
    shut_down();
    return 0;
  }
  return std::nullopt;
}

std::optional<int> Monitor::on_wakeup() {
  retention_.tick(config_);
  shipping_.tick(config_);
  const auto now = Clock::now();
  if (!session_.connected() && session_.wait() == std::chrono::milliseconds(0)) {
    ensure_database();
  }
  if (!scheduler_ && restart_at_ && now >= *restart_at_) start_scheduler();
  if (retry_due_ && now >= *retry_due_ && handshake_.wants_check()) check_queue();
  if (const auto due = batcher_.due(); due && now >= *due) queue_changes();
  if (watcher_->stats().failed) {
    spdlog::critical("stopping, so that a restart catches up on what was not watched");
    shut_down();
    return 1;
  }
  if (!catchup_recorded_ && watcher_->stats().catchup_done) {
    // A finished catch-up means: everything it found is in the queue (at once, without
    // waiting for event_delay).
    if (session_.connected() && batcher_.size() > 0) queue_changes();
    if (batcher_.size() == 0) {
      catchup_recorded_ = true;
      heartbeat();
    }
  }
  if (now - shipping_read_ >= kShippingReread && !config_.store_endpoint.empty()) {
    read_shipping(ship_error_);  // published by the heartbeat
  }
  if (now >= next_heartbeat_) {
    heartbeat();
    if (handshake_.wants_check()) check_queue(true);
  }
  if (recheck_queue_ && session_.connected()) {
    recheck_queue_ = false;
    check_queue();
  }
  // Last, since every statement above may have read notifications into libpq's queue,
  // where poll() cannot see them.
  handle_notifications();
  apply_control();  // a setting read when some statement connected again
  return std::nullopt;
}

}  // namespace tw::monitor
