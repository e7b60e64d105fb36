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

void Consumer::adopt(std::unique_ptr<ChildProcess> archiver) {
  spdlog::debug("consumer {}: archiver started (pid {})", index_, archiver->pid());
  archiver_ = std::move(archiver);
}

void Consumer::start() {
  thread_ = std::thread([this] { run(); });
}

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
    std::this_thread::sleep_for(
        std::min<Pacer::Clock::duration>(wait, std::chrono::milliseconds(50)));
  }
}

bool Consumer::pacer_allows() const {
  return pacer_ == nullptr || pacer_->delay(Pacer::Clock::now()) <= Pacer::Clock::duration::zero();
}

void Consumer::set_busy(bool busy) {
  if (busy_.exchange(busy) == busy) return;
  if (options_.busy_gauge == nullptr) return;
  if (busy) {
    options_.busy_gauge->enter();
  } else {
    options_.busy_gauge->leave();
  }
}

std::size_t Consumer::window() const {
  return pacer_ != nullptr || !suspects_.empty() ? 1 : kWindow;
}

void Consumer::run() {
  // A retiring consumer takes nothing new but finishes what it has taken.
  while (!leave_.load() || !in_flight_.empty() || !suspects_.empty()) {
    if (in_flight_.empty()) {
      if (!ensure_archiver()) {
        if (leave_.load()) {
          // Stopping with no archiver to run them: they go back to the queue to run later.
          while (!suspects_.empty()) {
            fail(Sent{std::move(suspects_.front()), epoch_seconds()}, false,
                 "the scheduler stopped before the item could run again");
            suspects_.pop_front();
          }
          set_busy(false);
        }
        continue;
      }
      wait_for_pacer();
      if (!suspects_.empty()) {
        db::ClaimedItem item = std::move(suspects_.front());
        suspects_.pop_front();
        send(std::move(item));
        continue;
      }
      auto item = queue_.pop(leave_);
      if (!item) break;
      send(std::move(*item));
      continue;
    }
    // Keep the window full with items free to go now; otherwise wait for an answer.
    if (!leave_.load() && archiver_ && in_flight_.size() < window() &&
        (in_flight_bytes_ < kWindowBytes || in_flight_.size() < kWindowMinimum) && pacer_allows()) {
      if (auto item = queue_.try_pop()) {
        send(std::move(*item));
        continue;
      }
    }
    receive();
  }
  if (archiver_) {
    // EOF on stdin tells the archiver to exit; terminate() waits, then escalates.
    archiver_->close_stdin();
    if (!archiver_->wait_exit(options_.stop_grace)) archiver_->terminate(options_.stop_grace);
    archiver_.reset();
  }
  set_busy(false);
  finished_.store(true);
  notify_();
}

void Consumer::complete(const Sent& sent, std::uint64_t bytes, std::uint64_t cpu) {
  const double finished = epoch_seconds();
  reporter_.add(db::Completion{sent.item.id, bytes, cpu, sent.started, finished, {}});
  const std::string folded = fmt::format("coalesced into item {}", sent.item.id);
  for (const auto f : sent.item.followers) {
    reporter_.add(db::Completion{f, 0, 0, sent.started, finished, folded});
  }
  queue_.finished(sent.item.id);
}

void Consumer::fail(const Sent& sent, bool permanent, const std::string& message) {
  const double finished = epoch_seconds();
  reporter_.add(db::Failure{sent.item.id, permanent, message, sent.started, finished});
  for (const auto f : sent.item.followers) {
    reporter_.add(db::Failure{f, permanent, message, sent.started, finished});
  }
  queue_.finished(sent.item.id);
}

void Consumer::archiver_failed(const std::string& message) {
  in_flight_bytes_ = 0;  // every item in flight leaves it, one way or the other
  if (in_flight_.size() == 1) {
    const Sent sent = std::move(in_flight_.front());
    in_flight_.pop_front();
    fail(sent, false, message);
  } else if (!in_flight_.empty()) {
    spdlog::info("consumer {}: {} items were in flight ({}); sending them again one at a time",
                 index_, in_flight_.size(), message);
    for (auto it = in_flight_.rbegin(); it != in_flight_.rend(); ++it) {
      suspects_.push_front(std::move(it->item));
    }
    in_flight_.clear();
  }
  if (suspects_.empty()) set_busy(false);
}

void Consumer::send(db::ClaimedItem item) {
  set_busy(true);
  const std::string request =
      format_request(Request{item.id, item.op, item.path, item.dest_path, item.order});
  in_flight_bytes_ += item.size;
  in_flight_.push_back(Sent{std::move(item), epoch_seconds()});
  if (!archiver_->write_line(request)) {
    kill_archiver("stopped reading requests");
    archiver_failed("archiver died before taking the item");
  }
}

void Consumer::receive() {
  std::string line;
  const auto status = archiver_->read_line(line, options_.item_timeout);
  switch (status) {
    case ChildProcess::ReadStatus::Timeout:
      kill_archiver("exceeded item_timeout");
      archiver_failed(fmt::format("archiver exceeded item_timeout ({} s)",
                                  options_.item_timeout.count() / 1000.0));
      return;
    case ChildProcess::ReadStatus::Eof:
      kill_archiver("exited while working");
      archiver_failed("archiver exited while working on the item");
      return;
    case ChildProcess::ReadStatus::Overlong:
      kill_archiver("answered garbage");
      archiver_failed("archiver answered garbage: an over-long line");
      return;
    case ChildProcess::ReadStatus::Line:
      break;
  }
  const std::int64_t expected = in_flight_.front().item.id;
  auto response = parse_response(line);
  if (!response || response->id != expected) {
    kill_archiver("answered garbage");
    archiver_failed(response ? fmt::format("archiver answered for item {} instead", response->id)
                             : fmt::format("archiver answered garbage: {}", response.error()));
    return;
  }
  const Sent sent = std::move(in_flight_.front());
  in_flight_.pop_front();
  in_flight_bytes_ -= sent.item.size;
  restart_backoff_ = std::chrono::milliseconds(0);
  if (pacer_) pacer_->charge(response->cpu_us, response->archive_bytes, Pacer::Clock::now());
  switch (response->outcome) {
    case Outcome::Complete:
      complete(sent, response->archive_bytes, response->cpu_us);
      break;
    case Outcome::FailedPermanent:
      fail(sent, true, response->message);
      break;
    case Outcome::FailedRetry:
      fail(sent, false, response->message);
      break;
  }
  if (in_flight_.empty()) set_busy(false);
}

}  // namespace tw::scheduler
