#include "scheduler/consumer.hpp"

#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/protocol.hpp"
#include "common/time.hpp"

namespace tw::scheduler {
namespace {
constexpr auto kFirstRestartDelay = std::chrono::milliseconds(100);
constexpr auto kMaxRestartDelay = std::chrono::milliseconds(10000);
}  // namespace

Consumer::Consumer(int index, Options options, std::shared_ptr<Launcher> launcher,
                   BatchQueue& queue, Reporter& reporter, Notify notify)
    : index_(index),
      options_(std::move(options)),
      launcher_(std::move(launcher)),
      queue_(queue),
      reporter_(reporter),
      notify_(std::move(notify)),
      pacer_(options_.pacer && options_.pacer->limited() ? options_.pacer.get() : nullptr) {}

Consumer::~Consumer() {
  retire();
  join();
}

void Consumer::start() { thread_ = std::thread([this] { run(); }); }

void Consumer::retire() {
  leave_.store(true);
  queue_.wake_all();
}

void Consumer::join() {
  if (thread_.joinable()) thread_.join();
}

bool Consumer::ensure_archiver() {
  if (archiver_) return true;
  if (restart_backoff_.count() > 0) {
    // Sleep in small steps so a retiring consumer leaves promptly.
    const auto until = std::chrono::steady_clock::now() + restart_backoff_;
    while (!leave_.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (leave_.load()) return false;
  }
  try {
    archiver_ = launcher_->launch(options_.archiver);
    spdlog::debug("consumer {}: archiver started (pid {})", index_, archiver_->pid());
    return true;
  } catch (const std::exception& e) {
    restart_backoff_ = std::clamp(restart_backoff_ * 2, kFirstRestartDelay, kMaxRestartDelay);
    spdlog::error("consumer {}: {}; retrying in {} ms", index_, e.what(), restart_backoff_.count());
    return false;
  }
}

void Consumer::kill_archiver(const char* why) {
  if (!archiver_) return;
  const pid_t pid = archiver_->pid();
  const int status = archiver_->terminate(options_.stop_grace);
  spdlog::warn("consumer {}: archiver {} {} (exit status {}); restarting it", index_, pid, why,
               status);
  archiver_.reset();
  restart_backoff_ = std::clamp(restart_backoff_ * 2, kFirstRestartDelay, kMaxRestartDelay);
}

// Waits (in small steps, so a retiring consumer leaves promptly) until the pacer allows
// the next dispatch.
void Consumer::wait_for_pacer() {
  if (!pacer_) return;
  while (!leave_.load()) {
    const auto wait = pacer_->delay(Pacer::Clock::now());
    if (wait <= Pacer::Clock::duration::zero()) return;
    std::this_thread::sleep_for(std::min<Pacer::Clock::duration>(wait, std::chrono::milliseconds(50)));
  }
}

void Consumer::run() {
  while (!leave_.load()) {
    if (!ensure_archiver()) continue;
    wait_for_pacer();
    auto item = queue_.pop(leave_);
    if (!item) break;
    busy_.store(true);
    if (options_.busy_gauge) options_.busy_gauge->enter();
    process(*item);
    if (options_.busy_gauge) options_.busy_gauge->leave();
    busy_.store(false);
    queue_.finished(item->id);
  }
  if (archiver_) {
    // EOF on stdin tells the archiver to exit; terminate() waits, then escalates.
    archiver_->close_stdin();
    if (!archiver_->wait_exit(options_.stop_grace)) archiver_->terminate(options_.stop_grace);
    archiver_.reset();
  }
  finished_.store(true);
  notify_();
}

void Consumer::process(const db::ClaimedItem& item) {
  const double started = epoch_seconds();
  // The outcome applies to the item and to every change coalesced into it.
  const auto complete = [&](std::uint64_t bytes, std::uint64_t cpu, const std::string& note) {
    const double finished = epoch_seconds();
    reporter_.add(db::Completion{item.id, bytes, cpu, started, finished, note});
    const std::string folded = fmt::format("coalesced into item {}", item.id);
    for (const auto f : item.followers) reporter_.add(db::Completion{f, 0, 0, started, finished, folded});
  };
  const auto fail = [&](bool permanent, const std::string& message) {
    const double finished = epoch_seconds();
    reporter_.add(db::Failure{item.id, permanent, message, started, finished});
    for (const auto f : item.followers) reporter_.add(db::Failure{f, permanent, message, started, finished});
  };
  const std::string request =
      format_request(Request{item.id, item.op, item.path, item.dest_path});
  if (!archiver_->write_line(request)) {
    kill_archiver("stopped reading requests");
    fail(false, "archiver died before taking the item");
    return;
  }
  std::string line;
  const auto status = archiver_->read_line(line, options_.item_timeout);
  switch (status) {
    case ChildProcess::ReadStatus::Timeout:
      kill_archiver("exceeded item_timeout");
      fail(false, fmt::format("archiver exceeded item_timeout ({} s)",
                              options_.item_timeout.count() / 1000.0));
      return;
    case ChildProcess::ReadStatus::Eof:
      kill_archiver("exited while working");
      fail(false, "archiver exited while working on the item");
      return;
    case ChildProcess::ReadStatus::Overlong:
      kill_archiver("answered garbage");
      fail(false, "archiver answered garbage: an over-long line");
      return;
    case ChildProcess::ReadStatus::Line:
      break;
  }
  auto response = parse_response(line);
  if (!response || response->id != item.id) {
    kill_archiver("answered garbage");
    fail(false, response ? fmt::format("archiver answered for item {} instead", response->id)
                         : fmt::format("archiver answered garbage: {}", response.error()));
    return;
  }
  restart_backoff_ = std::chrono::milliseconds(0);
  if (pacer_) pacer_->charge(response->cpu_us, response->archive_bytes, Pacer::Clock::now());
  switch (response->outcome) {
    case Outcome::Complete:
      complete(response->archive_bytes, response->cpu_us, {});
      return;
    case Outcome::FailedPermanent:
      fail(true, response->message);
      return;
    case Outcome::FailedRetry:
      fail(false, response->message);
      return;
  }
}

}  // namespace tw::scheduler
