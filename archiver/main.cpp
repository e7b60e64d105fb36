// timewarp-archiver: reads request lines on stdin, archives each item into the backup
// root, and writes one response line per request on stdout (DESIGN.md, "The scheduler <->
// archiver interface"). Logs go to stderr only.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "archiver/request_handler.hpp"
#include "archive/disk.hpp"
#include "archive/store.hpp"
#include "common/config.hpp"
#include "common/line_buffer.hpp"
#include "common/logging.hpp"

namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);
// Self-pipe: the handler writes a byte so that a poll on stdin wakes up even if the signal
// lands between the flag check and the wait.
int g_wake_pipe[2] = {-1, -1};

void on_signal(int) {
  const int saved = errno;
  g_stop.store(true);
  [[maybe_unused]] const ssize_t n = ::write(g_wake_pipe[1], "x", 1);
  errno = saved;
}

void install_signal_handlers() {
  if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR so we can stop
  sigaction(SIGTERM, &action, nullptr);
  // A Ctrl-C in the terminal reaches every process of the foreground group, archivers
  // included; they must keep working until the scheduler's orderly STOP ends them (it lets
  // each archiver finish its item, then closes its stdin), so SIGINT is ignored here as in
  // the scheduler. SIGTERM and EOF still stop the archiver.
  signal(SIGINT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
}

// Test-only: TIMEWARP_ARCHIVER_CRASH_AT_STEP=N kills the process with SIGKILL just before
// its Nth durable write step, to prove that a crash at any point leaves a valid archive.
std::function<void(std::string_view)> crash_hook() {
  const char* value = std::getenv("TIMEWARP_ARCHIVER_CRASH_AT_STEP");
  if (value == nullptr || *value == '\0') return {};
  const long target = std::strtol(value, nullptr, 10);
  if (target <= 0) return {};
  // Steps come from the request thread and from the store's sync thread.
  return [target, count = std::make_shared<std::atomic<long>>(0)](std::string_view) {
    if (++*count == target) ::kill(::getpid(), SIGKILL);
  };
}

constexpr std::size_t kMaxLine = 1 << 20;
// How long without a request makes the archive quiet (LineReader's on_quiet), and the
// first and the longest wait between two tries when another process keeps the catalog
// busy (the other archivers go quiet at the same moment and fold the same journal).
constexpr auto kQuiet = std::chrono::milliseconds(1000);
constexpr auto kFirstQuietRetry = std::chrono::milliseconds(250);
constexpr auto kMaxQuietRetry = std::chrono::seconds(64);
// Of a longer line only this much is kept: enough for its id, not for its path.
constexpr std::size_t kKeptOfOverlong = 64;

// Reads newline-terminated lines from a descriptor; stops on EOF or a stop request.
class LineReader {
 public:
  enum class Status { Line, Overlong, Eof, Stopped, Error };

  // `on_quiet` runs when no request came for kQuiet after the last one, and again each
  // time it returns false (not done): after kFirstQuietRetry, then twice as long each
  // time, at most kMaxQuietRetry apart.
  // `group_fd()` (optional) names a descriptor to wait on beside the input (-1: none);
  // `on_group()` runs when it is readable.
  LineReader(int fd, std::function<bool()> on_quiet, std::function<int()> group_fd = {},
             std::function<void()> on_group = {})
      : fd_(fd),
        on_quiet_(std::move(on_quiet)),
        group_fd_(std::move(group_fd)),
        on_group_(std::move(on_group)) {}

  Status next(std::string& line) {
    const Status status = read_next(line);
    if (status == Status::Line || status == Status::Overlong) {
      quiet_due_ = on_quiet_ != nullptr;
      quiet_wait_ = kQuiet;
    }
    return status;
  }

  // True when next() would not wait: a whole line (or the end of input) is here already,
  // after taking in whatever stdin holds now. Part of a line is not enough: its rest may
  // come only after the answers the caller is holding back.
  bool ready() {
    while (!lines_.ready() && !eof_) {
      struct pollfd fd = {fd_, POLLIN, 0};
      if (::poll(&fd, 1, 0) <= 0) return false;
      if (!take_in()) return errno != EINTR && errno != EAGAIN;  // next() reports the error
    }
    return true;
  }

 private:
  Status read_next(std::string& line) {
    while (true) {
      switch (lines_.next(line)) {
        case tw::LineBuffer::Status::Line:
          return Status::Line;
        case tw::LineBuffer::Status::Overlong:
          return Status::Overlong;
        case tw::LineBuffer::Status::NeedMore:
          break;
      }
      if (eof_) return lines_.take_unterminated(line) ? Status::Line : Status::Eof;
      if (g_stop.load()) return Status::Stopped;
      struct pollfd fds[3] = {
          {fd_, POLLIN, 0}, {g_wake_pipe[0], POLLIN, 0}, {group_fd_ ? group_fd_() : -1, POLLIN, 0}};
      const int polled = ::poll(fds, 3, quiet_due_ ? static_cast<int>(quiet_wait_.count()) : -1);
      if (polled < 0) {
        if (errno == EINTR) continue;
        return Status::Error;
      }
      if (fds[2].revents != 0) {
        on_group_();
        if (fds[0].revents == 0) continue;
      }
      if (polled == 0) {
        quiet_due_ = !on_quiet_();
        quiet_wait_ = quiet_wait_ == kQuiet ? kFirstQuietRetry
                                            : std::min(2 * quiet_wait_,
                                                       std::chrono::milliseconds(kMaxQuietRetry));
        continue;
      }
      if (fds[0].revents == 0) continue;  // woken by a signal
      if (!take_in() && errno != EINTR && errno != EAGAIN) return Status::Error;
    }
  }

  // One read of what the descriptor holds into lines_ (at its end, eof_ is set); false on
  // a read error, errno telling which.
  bool take_in() {
    char chunk[64 * 1024];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0) return false;
    if (n == 0) {
      eof_ = true;
    } else {
      lines_.append(std::string_view(chunk, static_cast<std::size_t>(n)));
    }
    return true;
  }

  int fd_;
  std::function<bool()> on_quiet_;
  std::function<int()> group_fd_;
  std::function<void()> on_group_;
  bool quiet_due_ = false;  // a request came since on_quiet_ last returned true
  std::chrono::milliseconds quiet_wait_ = kQuiet;
  bool eof_ = false;        // the end of input was read
  tw::LineBuffer lines_{kMaxLine, kKeptOfOverlong};
};

// Writes `responses` to stdout, one line each, in one write; false when stdout is gone.
bool write_responses(const std::vector<tw::Response>& responses) {
  std::string out;
  for (const auto& response : responses) {
    out += tw::format_response(response);
    out += '\n';
  }
  if (tw::archive::write_all(STDOUT_FILENO, out.data(), out.size()) == 0) return true;
  spdlog::error("cannot write the response: {}", std::strerror(errno));
  return false;
}

// The answers of a group of requests (FORMAT.md, "Format 2", Group commit): a COMPLETE is
// written only once the store has made the group durable, all answers in request order.
// A group is closed when no further request waits on stdin and the store is not busy
// syncing an earlier group (a group closed then would only wait behind that sync; it
// closes as soon as the sync is done, with whatever requests came meanwhile), or at 64
// requests, 32 MiB of new content or 50 ms; the requests after it run while the store
// syncs it. On format 1 (and --null) every answer goes out at once.
class Answers {
 public:
  explicit Answers(tw::archive::Store* store) : store_(store) {
    grouping_ = store_ != nullptr;  // a writable store is format 2, which commits in groups
    if (grouping_) store_->begin_group();
  }

  void add(tw::Response response) {
    if (pending_.empty()) started_ = std::chrono::steady_clock::now();
    pending_.push_back(std::move(response));
  }

  bool pending() const { return !pending_.empty(); }

  bool full() const {
    return !grouping_ || pending_.size() >= 64 || store_->staged_bytes() >= (32u << 20) ||
           std::chrono::steady_clock::now() - started_ >= std::chrono::milliseconds(50);
  }

  // Closes the group: its answers are written once it is durable (by the store's thread).
  // False when stdout is gone.
  bool close() {
    if (!grouping_) {
      if (!pending_.empty() && !write_responses(pending_)) broken_->store(true);
      pending_.clear();
      return !broken_->load();
    }
    if (pending_.empty()) return !broken_->load();
    store_->close_group(
        [broken = broken_, group = std::move(pending_)](const tw::Status& durable) mutable {
          if (!durable) {
            spdlog::warn("a group of {} requests could not be made durable: {}", group.size(),
                         durable.error());
            for (auto& response : group) {
              if (response.outcome != tw::Outcome::Complete) continue;
              response.outcome = tw::Outcome::FailedRetry;
              response.message = durable.error();
            }
          }
          if (!broken->load() && !write_responses(group)) broken->store(true);
        });
    pending_.clear();
    return !broken_->load();
  }

  // Closes the group and waits until every answer is written; false when stdout is gone.
  bool finish() {
    close();
    if (grouping_) (void)store_->flush();  // a lost group is answered as such
    return !broken_->load();
  }

  bool broken() const { return broken_->load(); }

 private:
  tw::archive::Store* store_;
  bool grouping_ = false;
  std::vector<tw::Response> pending_;
  std::chrono::steady_clock::time_point started_;
  // Stdout is gone; set by the store's thread too, which may outlive this object.
  std::shared_ptr<std::atomic<bool>> broken_ = std::make_shared<std::atomic<bool>>(false);
};

int run(int argc, char** argv) {
  CLI::App app{"timewarp-archiver: archives the items named on stdin, one response line each"};
  app.name("timewarp-archiver");
  tw::Config config;
  bool null_mode = false;
  tw::add_config_options(app, config);
  app.add_flag("--null", null_mode, "answer every request COMPLETE 0 0 without touching files")
      ->configurable(false);
  if (const int code = tw::parse_command_line(app, argc, argv); code >= 0) return code;
  if (const int code = tw::setup_logging("timewarp-archiver", config); code >= 0) return code;
  install_signal_handlers();

  std::optional<tw::archive::Store> store;
  if (!null_mode) {
    if (config.backup_root.empty()) {
      spdlog::error("backup_root is required (set --backup-root, BACKUP_ROOT or the config key)");
      return 2;
    }
    tw::archive::StoreHooks hooks;
    hooks.before_write_step = crash_hook();
    hooks.cancelled = [] { return g_stop.load(); };
    tw::archive::CompressionOptions compression;
    compression.level = config.compression_level;
    compression.threads = config.compression_threads;
    auto opened = tw::archive::Store::open(config.backup_root, tw::archive::Store::Mode::ReadWrite,
                                           std::move(hooks), compression);
    if (!opened) {
      spdlog::error("{}", opened.error());
      return 1;
    }
    store.emplace(std::move(opened.value()));
  }
  spdlog::debug("ready ({})", null_mode ? "null mode" : config.backup_root);
  // What a SCAN leaves alone among a directory's entries: what the monitor would not queue.
  // An archiver given no source directories (run by hand) leaves nothing alone.
  std::optional<tw::Filter> filter;
  if (!config.source_dirs.empty()) {
    try {
      filter.emplace(tw::Filter::from_config(config));
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      return 2;
    }
  }
  tw::archive::RequestHandler handler(store ? &*store : nullptr, filter ? &*filter : nullptr);
  // A quiet archive's catalog is one file: its journal folded in a second after the last
  // request (FORMAT.md, "Format 2").
  Answers answers(store ? &*store : nullptr);
  // Whether an earlier group's sync is under way (the open group then stays open).
  const auto syncing = [&store]() { return store && store->syncing(); };
  LineReader reader(
      STDIN_FILENO,
      [&store]() {
        if (!store) return true;
        auto folded = store->fold_journal();
        if (!folded) spdlog::warn("{}", folded.error());
        return !folded || *folded;
      },
      [&store]() { return store ? store->group_fd() : -1; },
      [&store, &answers, &syncing]() {
        store->advance();
        // The sync the open group waited for is done: it goes now (a broken stdout is
        // seen after the next request, or at the end of input).
        if (answers.pending() && !syncing()) (void)answers.close();
      });
  std::string line;
  while (true) {
    const auto status = reader.next(line);
    if (status == LineReader::Status::Eof) return answers.finish() ? 0 : 1;
    if (status == LineReader::Status::Stopped) break;
    if (status == LineReader::Status::Error) {
      spdlog::error("cannot read stdin: {}", std::strerror(errno));
      return 1;
    }
    tw::Response response;
    if (status == LineReader::Status::Overlong) {
      // Only the line's start was kept: answer with its id and run nothing of it (its
      // path, cut short, could name another file or a whole directory).
      response.id = tw::request_id_of(line);
      response.outcome = tw::Outcome::FailedPermanent;
      response.message = "malformed request: line longer than 1 MiB";
      spdlog::warn("request {} refused: line longer than 1 MiB", response.id);
    } else {
      response = handler.handle_line(line);
    }
    answers.add(std::move(response));
    // First commit the groups whose sync is done (this clears the store's signal, so a sync
    // that ends after it signals again, and the open group is closed then).
    if (store) store->advance();
    if (((!reader.ready() && !syncing()) || answers.full() || g_stop.load()) &&
        !answers.close()) {
      return 1;
    }
    if (answers.broken()) return 1;
    if (g_stop.load()) break;
  }
  spdlog::info("stopping on a signal");
  return answers.finish() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "timewarp-archiver: " << e.what() << "\n";
    return 1;
  }
}
