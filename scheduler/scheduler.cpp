#include "scheduler/scheduler.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/archivers.hpp"
#include "common/escape.hpp"
#include "common/host.hpp"
#include "common/time.hpp"

namespace tw::scheduler {
namespace {

constexpr auto kMaxDbBackoff = std::chrono::milliseconds(5000);

// The scheduler's session. Its statements are prepared once and run thousands of times
// with parameters that do not change their best plan (a scheduler id, a batch size, a
// lease); PostgreSQL would otherwise plan the claim afresh at every call (about 1 ms of
// the server's CPU per batch, as much as claiming 40 rows). Statistics refreshed by
// ANALYZE (Queue::analyze_if_stale) still replace the cached plans.
db::Session::Options claiming_session(const std::string& conninfo) {
  auto options = db::Session::Options::of(conninfo, "scheduler", kMaxDbBackoff);
  options.on_connect = [](db::Connection& conn) {
    conn.exec("SET plan_cache_mode = force_generic_plan");
  };
  return options;
}

// What an archiver inherits of the scheduler's environment. It never connects to the
// database and takes its whole configuration as arguments (Scheduler::resize), so it gets
// no TIMEWARP_* or PG* variable (TIMEWARP_DATABASE and PGPASSWORD may hold a password)
// and nothing else of the operator's environment: only the locale and time zone (its log
// lines), PATH (a sane default for anything it might run) and the sanitizers' options (so
// a sanitizer build of the archiver behaves as configured).
const std::vector<std::string> kArchiverEnvironment = {
    "PATH",         "LANG",          "LANGUAGE",     "LC_*",         "TZ",
    "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS", "MSAN_OPTIONS"};

}  // namespace

Scheduler::Scheduler(Config config, std::shared_ptr<Launcher> launcher, int signal_fd, int ready_fd,
                     SchedulerHooks hooks)
    : config_(std::move(config)),
      launcher_(std::move(launcher)),
      signal_fd_(signal_fd),
      ready_fd_(ready_fd),
      hooks_(std::move(hooks)),
      strategy_(db::parse_strategy(config_.strategy).value_or(db::Strategy::Fifo)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      pacer_(std::make_shared<Pacer>(config_.max_cpu_percent, config_.max_bandwidth)),
      session_(claiming_session(config_.database)),
      batch_queue_(static_cast<std::size_t>(config_.batch_size), [this] { wake(); }) {
  if (!wake_fd_) throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigterm_fd_.reset(::signalfd(-1, &term, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigterm_fd_) throw std::runtime_error(fmt::format("signalfd: {}", std::strerror(errno)));
}

Scheduler::~Scheduler() = default;

void Scheduler::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(wake_fd_.get(), &one, sizeof one);
}

void Scheduler::publish_stats() {
  const auto s = stats();
  MutexLock lock(&stats_mutex_);
  published_stats_ = s;
}

db::SchedulerStats Scheduler::stats() const {
  db::SchedulerStats s;
  for (const auto& c : consumers_) {
    if (c->finished() || c->retiring()) continue;
    ++s.archivers;
    if (c->busy()) {
      ++s.busy;
    } else {
      ++s.idle;
    }
  }
  s.busy_high_water = busy_gauge_.high_water();
  s.batch_queue_length = static_cast<int>(batch_queue_.size());
  s.batch_queue_high_water = static_cast<int>(batch_queue_.high_water());
  s.database = session_.health();
  return s;
}

void Scheduler::start_archivers_early(int archivers) {
  const LaunchSpec spec = archiver_spec();
  for (int i = 0; i < archivers; ++i) {
    try {
      early_archivers_.push_back(launcher_->launch(spec));
    } catch (const std::exception&) {
      return;  // the consumers try again, and say why it fails
    }
  }
}

int Scheduler::run() {
  start_archivers_early(config_.archivers);
  scheduler_id_ =
      db::Queue(session_.connect_now())
          .register_scheduler(hostname(), static_cast<int>(::getpid()), db::to_string(strategy_),
                              config_.batch_size, config_.archivers);
  spdlog::info("scheduler {} started: strategy {}, batch size {}, {} archivers", scheduler_id_,
               config_.strategy, config_.batch_size, config_.archivers);

  Reporter::Options options;
  options.conninfo = config_.database;
  options.host = host_id(config_);
  options.scheduler_id = scheduler_id_;
  options.flush_interval = seconds_ms(config_.flush_interval);
  options.heartbeat_interval = seconds_ms(config_.heartbeat_interval);
  options.lease_seconds = config_.lease_time;
  options.retry = {config_.max_attempts, config_.retry_base_delay, config_.retry_max_delay};
  options.backlog_warning = config_.backlog_warning;
  options.prune_age = config_.prune_age;
  options.prune_interval = seconds_ms(config_.prune_interval);
  // The reporter thread reads the figures this thread publishes.
  reporter_ = std::make_unique<Reporter>(options, [this] {
    MutexLock lock(&stats_mutex_);
    return published_stats_;
  });
  reporter_->start();
  resize(config_.archivers);

  while (!stop_requested_) {
    handle_pending_signals(false);
    if (stop_requested_) break;
    if (signals_.empty()) wait_for_event(std::chrono::milliseconds(1000));
    reap_finished_consumers();
  }
  stop();
  return 0;
}

void Scheduler::wait_for_event(std::chrono::milliseconds timeout) {
  pollfd fds[3] = {
      {wake_fd_.get(), POLLIN, 0}, {sigterm_fd_.get(), POLLIN, 0}, {signal_fd_, POLLIN, 0}};
  const nfds_t n = input_closed_ ? 2 : 3;
  const int ready = ::poll(fds, n, static_cast<int>(timeout.count()));
  publish_stats();
  if (ready <= 0) return;
  std::uint64_t count = 0;
  while (::read(wake_fd_.get(), &count, sizeof count) > 0) {
  }
  signalfd_siginfo info{};
  while (::read(sigterm_fd_.get(), &info, sizeof info) == sizeof info) {
    spdlog::info("SIGTERM received: stopping as if told STOP");
    signals_.push_back({Signal::Stop});
  }
  if (!input_closed_ && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) read_signals();
}

void Scheduler::read_signals() {
  char chunk[4096];
  const ssize_t n = ::read(signal_fd_, chunk, sizeof chunk);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    spdlog::warn("reading signals failed: {}; stopping", std::strerror(errno));
  }
  if (n <= 0) {
    input_closed_ = true;
    spdlog::info("signal pipe closed: stopping");
    signals_.push_back({Signal::Stop});
    return;
  }
  signal_lines_.append(std::string_view(chunk, static_cast<std::size_t>(n)));
  std::string line;
  while (true) {
    const auto status = signal_lines_.next(line);
    if (status == LineBuffer::Status::NeedMore) break;
    if (status == LineBuffer::Status::Overlong) {
      spdlog::warn("ignoring an over-long signal line (more than {} bytes)", kMaxSignalLine);
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "READY") {
      signals_.push_back({Signal::Ready});
    } else if (line == "STOP") {
      signals_.push_back({Signal::Stop});
    } else if (line.rfind("ARCHIVERS ", 0) == 0) {
      if (const auto archivers = parse_archivers(std::string_view(line).substr(10))) {
        signals_.push_back({Signal::Archivers, *archivers});
      } else {
        spdlog::warn("ignoring signal '{}': ARCHIVERS takes a number from {} to {}",
                     shown_text(line, 80), kMinArchivers, kMaxArchivers);
      }
    } else {
      spdlog::warn("ignoring unknown signal line '{}'", shown_text(line, 80));
    }
  }
}

bool Scheduler::handle_pending_signals(bool draining) {
  while (!signals_.empty()) {
    const SignalLine s = signals_.front();
    signals_.pop_front();
    switch (s.signal) {
      case Signal::Stop:
        stop_requested_ = true;
        return false;
      case Signal::Archivers:
        resize(s.archivers);
        break;
      case Signal::Ready:
        if (!draining && !drain()) return false;
        break;
    }
  }
  return !stop_requested_;
}

void Scheduler::resize(int archivers) {
  reap_finished_consumers();
  std::vector<Consumer*> active;
  for (auto& c : consumers_) {
    if (!c->retiring()) active.push_back(c.get());
  }
  const int have = static_cast<int>(active.size());
  if (archivers > have) {
    Consumer::Options options;
    options.archiver = archiver_spec();
    options.item_timeout = seconds_ms(config_.item_timeout);
    options.pacer = pacer_;
    options.busy_gauge = &busy_gauge_;
    for (int i = have; i < archivers; ++i) {
      auto consumer = std::make_unique<Consumer>(next_consumer_index_++, options, launcher_,
                                                 batch_queue_, *reporter_, [this] { wake(); });
      if (!early_archivers_.empty()) {
        consumer->adopt(std::move(early_archivers_.front()));
        early_archivers_.erase(early_archivers_.begin());
      }
      consumer->start();
      consumers_.push_back(std::move(consumer));
    }
  } else if (archivers < have) {
    // Idle consumers leave first; a busy one finishes its item before leaving.
    std::stable_partition(active.begin(), active.end(), [](Consumer* c) { return !c->busy(); });
    for (int i = 0; i < have - archivers; ++i) active[static_cast<std::size_t>(i)]->retire();
  }
  if (archivers != have) spdlog::info("archivers: {} -> {}", have, archivers);
  wanted_archivers_ = archivers;
}

LaunchSpec Scheduler::archiver_spec() const {
  LaunchSpec spec;
  spec.executable =
      config_.archiver_exe.empty() ? sibling_executable("timewarp-archiver") : config_.archiver_exe;
  spec.args = config_to_args(config_, Audience::Archiver);
  for (const auto& arg : config_.archiver_args) spec.args.push_back(arg);
  spec.inherit_env = kArchiverEnvironment;
  return spec;
}

void Scheduler::reap_finished_consumers() {
  std::erase_if(consumers_, [](const std::unique_ptr<Consumer>& c) {
    if (!c->finished()) return false;
    c->join();
    return true;
  });
}

bool Scheduler::drain() {
  const auto low_water = batch_queue_.low_water();
  bool exhausted = false;
  while (true) {
    if (!handle_pending_signals(true)) return false;

    if (!exhausted && batch_queue_.size() <= low_water) {
      auto batch = with_queue("claiming a batch", [&](db::Queue& queue) {
        queue.analyze_if_stale();  // cheap unless thousands of rows came in since the last
        return queue.claim(
            {scheduler_id_, config_.batch_size, strategy_, config_.lease_time, config_.coalesce});
      });
      if (!batch) {
        wait_for_event(session_.wait("claiming a batch"));
        continue;
      }
      // A short batch means nothing more was claimable at that instant.
      std::size_t rows = 0;
      for (const auto& item : *batch) rows += 1 + item.followers.size();
      exhausted = rows < static_cast<std::size_t>(config_.batch_size);
      if (!batch->empty()) {
        reporter_->hold(*batch);
        batch_queue_.push(std::move(*batch));
      }
      continue;
    }
    if (exhausted && batch_queue_.idle()) {
      if (!reporter_->flush(std::chrono::milliseconds(200))) continue;  // database away
      // The last look: anything claimable now is ours to do before READY.
      const auto claimable =
          with_queue("looking for work", [](db::Queue& queue) { return queue.has_claimable(); });
      if (!claimable) {
        wait_for_event(session_.wait("looking for work"));
        continue;
      }
      if (*claimable) {
        exhausted = false;
        continue;
      }
      if (hooks_.before_ready) hooks_.before_ready();
      return send_ready();
    }
    wait_for_event(std::chrono::milliseconds(100));
  }
}

bool Scheduler::send_ready() {
  static constexpr char kReady[] = "READY\n";
  std::size_t done = 0;
  while (done < sizeof kReady - 1) {
    const ssize_t n = ::write(ready_fd_, kReady + done, sizeof kReady - 1 - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spdlog::warn("cannot write READY ({}): stopping", std::strerror(errno));
      stop_requested_ = true;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

void Scheduler::stop() {
  spdlog::info("stopping: returning unstarted items, letting consumers finish");
  // Items still in the batch queue were never started: back to NEW.
  std::vector<std::int64_t> unstarted;
  for (const auto& item : batch_queue_.take_all()) {
    unstarted.push_back(item.id);
    unstarted.insert(unstarted.end(), item.followers.begin(), item.followers.end());
  }
  batch_queue_.close();
  for (auto& c : consumers_) c->retire();
  if (!unstarted.empty()) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const auto n = with_queue("returning unstarted items", [&](db::Queue& queue) {
        return queue.release(scheduler_id_, unstarted);
      });
      if (n) {
        spdlog::info("returned {} unstarted items to NEW", *n);
        reporter_->unhold(unstarted);
        break;
      }
      wait_for_event(session_.wait("returning unstarted items"));
    }
  }
  for (auto& c : consumers_) c->join();
  consumers_.clear();
  reporter_->stop(std::chrono::seconds(30));
  spdlog::info("scheduler {} stopped", scheduler_id_);
}

}  // namespace tw::scheduler
