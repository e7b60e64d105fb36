#include "cli/status_commands.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/archive_status.hpp"
#include "cli/status_view.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"
#include "db/connection.hpp"
#include "db/housekeeping.hpp"
#include "db/session.hpp"
#include "db/status.hpp"

namespace tw::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct StatusOptions {
  bool json = false;
  bool watch = false;
  double interval = 1.0;  // seconds between frames of --watch
  int count = 0;          // frames before --watch ends (0: until interrupted)
  int failures = 10;      // failures of the last hour listed
  std::string color = "auto";
};

struct HistoryOptions {
  std::string path;
  int limit = 100;
  bool json = false;
};

struct FailedOptions {
  int limit = 100;
  bool json = false;
};

struct RetryOptions {
  std::vector<std::int64_t> ids;
  bool all_failed = false;
};

struct PruneOptions {
  std::optional<double> older_than;  // default: config.prune_age
  int batch_rows = 5000;
};

bool use_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  const char* term = std::getenv("TERM");
  if (term && std::string_view(term) == "dumb") return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

ViewOptions view_options(const Config& config, const db::Connection& conn,
                         const std::string& color) {
  ViewOptions view;
  view.color = use_color(color);
  // A scheduler renews its leases with every heartbeat; one that missed a lease time's
  // worth of heartbeats is not working.
  view.stale_after = std::max(config.lease_time, 3 * config.heartbeat_interval);
  view.database = conn.describe();
  return view;
}

// An error message for one line: a missing schema (a database never migrated) says what to
// do instead of showing the failed SQL.
std::string error_text(std::string text, std::string_view sqlstate) {
  // 42P01 undefined_table, 3F000 invalid_schema_name, 42883 undefined_function.
  if (sqlstate == "42P01" || sqlstate == "3F000" || sqlstate == "42883") {
    return "the database has no TimeWarp schema (or an old one): run `timewarp migrate`, or "
           "start timewarp-monitor";
  }
  if (const auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

std::string error_text(const db::SqlError& e) { return error_text(e.what(), e.sqlstate()); }

// Runs a command, turning a missing schema into a message that says what to do.
template <class Fn>
int with_schema_hint(Fn&& fn) {
  try {
    return fn();
  } catch (const db::SqlError& e) {
    throw std::runtime_error(error_text(e));
  }
}

// Set by the first SIGINT or SIGTERM that arrives while a frame is being read or drawn.
volatile std::sig_atomic_t g_interrupted = 0;

void note_interrupt(int /*signal*/) { g_interrupted = 1; }

// Makes the first SIGINT or SIGTERM end the watch cleanly after the frame in hand, whenever
// it comes; the handler resets itself, so a second one ends the process at once (a hung
// connection can always be interrupted).
void catch_interrupts() {
  struct sigaction action {};
  action.sa_handler = note_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

// Waits up to `timeout` for SIGINT or SIGTERM. True when one came, now or earlier (the
// watch ends cleanly). The signals are blocked only while waiting.
bool wait_for_interrupt(std::chrono::milliseconds timeout) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  const auto deadline = Clock::now() + timeout;
  bool interrupted = g_interrupted != 0;
  while (!interrupted) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    timespec ts = ns_timespec(left.count());
    const int signal = ::sigtimedwait(&set, nullptr, &ts);
    if (signal > 0)
      interrupted = true;
    else if (errno != EINTR)
      break;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return interrupted;
}

// Terminal rows, or 0 when unknown.
int terminal_rows() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0) return 0;
  return ws.ws_row;
}

// A frame for a terminal: drawn from the top-left corner over the previous one, each line
// clearing its own rest and the screen below the frame cleared, so nothing flickers; cut to
// the window's height.
std::string terminal_frame(const std::string& text, bool first) {
  std::vector<std::string_view> lines;
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    lines.push_back(rest.substr(0, nl));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  const int rows = terminal_rows();
  std::size_t hidden = 0;
  if (rows > 2 && lines.size() > static_cast<std::size_t>(rows - 1)) {
    hidden = lines.size() - static_cast<std::size_t>(rows - 2);
    lines.resize(static_cast<std::size_t>(rows - 2));
  }
  std::string out = first ? "\x1b[H\x1b[2J" : "\x1b[H";
  for (const auto& line : lines) {
    out.append(line);
    out += "\x1b[K\n";
  }
  if (hidden) out += fmt::format("({} more lines: enlarge the window)\x1b[K\n", hidden);
  out += "\x1b[J";
  return out;
}

// The archive's part of `status`, when a backup root is configured: read on the first frame,
// then again once a minute at most (reading plans a forget over every history), so a watch
// stays cheap.
class ArchiveFigures {
 public:
  explicit ArchiveFigures(const Config& config) : config_(config) {}

  // The figures for a frame drawn now (none without a backup root), and in `age` how many
  // seconds ago they were read.
  const ArchiveStatus* now(double& age) {
    age = 0;
    if (config_.backup_root.empty()) return nullptr;
    const auto frame = Clock::now();
    if (!figures_ || frame - read_ >= kRereadAfter) {
      figures_ = read_archive_status(config_);
      read_ = Clock::now();
      return &*figures_;  // read for this frame: no age
    }
    age = seconds_of(frame - read_);
    return &*figures_;
  }

 private:
  static constexpr std::chrono::seconds kRereadAfter{60};
  const Config& config_;
  std::optional<ArchiveStatus> figures_;
  Clock::time_point read_;
};

// One status: the queue's, then the archive's when there is one to show. JSON when
// `json_indent` is set (-1: on one line).
std::string status_output(const db::StatusReport& report, const ViewOptions& view,
                          const WatchProgress* progress, ArchiveFigures& archive,
                          std::optional<int> json_indent) {
  double age = 0;
  const ArchiveStatus* figures = archive.now(age);
  if (json_indent) {
    Json doc = status_json(report, view, progress);
    if (figures != nullptr) doc["archive"] = archive_json(*figures, age);
    return dump_json(doc, *json_indent) + "\n";
  }
  std::string text = status_text(report, view, progress);
  if (figures != nullptr) text += archive_text(*figures, age, view);
  return text;
}

int run_status_once(const Config& config, const StatusOptions& options) {
  db::Connection conn(config.database);
  const auto view = view_options(config, conn, options.color);
  const auto report = db::read_status(conn, options.failures);
  ArchiveFigures archive(config);
  std::cout << status_output(report, view, nullptr, archive,
                             options.json ? std::optional<int>(2) : std::nullopt);
  return 0;
}

// Redraws the status every interval until interrupted (or `count` frames). On a terminal
// each frame replaces the last; otherwise (a pipe, a log, a dumb SSH session) frames follow
// each other separated by a blank line, without escape codes; with --json each frame is
// one JSON document on one line. A lost database shows as a frame of its own, and the
// next frame reconnects.
int run_status_watch(const Config& config, const StatusOptions& options) {
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  const auto interval =
      std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.1, options.interval) * 1000));
  std::optional<std::int64_t> finished_at_start;
  ViewOptions view;
  ArchiveFigures archive(config);
  // One attempt a frame: the frame shows why the database is away, so nothing is logged.
  db::Session session(
      {.conninfo = config.database,
       .who = "status",
       .first_delay = interval,
       .max_delay = interval,
       .on_connect =
           [&](db::Connection& conn) { view = view_options(config, conn, options.color); },
       .log_failures = false});
  catch_interrupts();
  for (int frame = 1; options.count <= 0 || frame <= options.count; ++frame) {
    const auto started = Clock::now();
    std::string body;
    const auto report = session.run("reading the status", [&](db::Connection& conn) {
      return db::read_status(conn, options.failures);
    });
    if (report) {
      const auto finished = report->counts.completed + report->counts.failed;
      if (!finished_at_start) finished_at_start = finished;
      // Pruning lowers the completed total; progress never goes backwards for it.
      finished_at_start = std::min(*finished_at_start, finished);
      const WatchProgress progress{finished - *finished_at_start, backlog(report->counts), frame};
      body = status_output(*report, view, &progress, archive,
                           options.json ? std::optional<int>(-1) : std::nullopt);
    } else {
      const auto failure = session.last_failure().value_or(
          db::Session::Failure{db::ErrorKind::Outage, "no connection yet", ""});
      const auto text = error_text(failure.message, failure.sqlstate);
      if (options.json) {
        body = dump_json({{"error", text}, {"watch", {{"frame", frame}}}}, -1) + "\n";
      } else {
        body = fmt::format(
            "TimeWarp status: {}: {}\nretrying every {}\n",
            failure.kind == db::ErrorKind::Outage ? "database unreachable" : "database error", text,
            duration(seconds_of(interval)));
      }
    }
    if (options.json) {
      std::cout << body;
    } else if (tty) {
      std::cout << terminal_frame(body, frame == 1);
    } else {
      std::cout << (frame == 1 ? "" : "\n") << body;
    }
    std::cout << std::flush;
    if (options.count > 0 && frame >= options.count) break;
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    if (wait_for_interrupt(std::max(std::chrono::milliseconds(0), interval - spent))) break;
  }
  return 0;
}

int run_history(const Config& config, const HistoryOptions& options) {
  const std::string path = escape_bytes(absolute_path(options.path).native());
  db::Connection conn(config.database);
  const auto view = view_options(config, conn, "auto");
  const auto items = db::item_history(conn, path, options.limit);
  if (options.json) {
    Json list = Json::array();
    for (const auto& item : items) list.push_back(item_json(item));
    std::cout << dump_json({{"path", path}, {"items", std::move(list)}}, 2) << "\n";
    return 0;
  }
  if (items.empty()) {
    std::cout << fmt::format("no queue items for {} (never queued, or pruned)\n", shown_text(path));
    return 0;
  }
  std::cout << fmt::format("{}: {} queue item{}{}\n", shown_text(path), items.size(),
                           items.size() == 1 ? "" : "s",
                           options.limit > 0 && static_cast<int>(items.size()) == options.limit
                               ? " (the newest; --limit 0 for all)"
                               : "");
  std::cout << items_text(items, view);
  return 0;
}

int run_failed(const Config& config, const FailedOptions& options) {
  db::Connection conn(config.database);
  const auto view = view_options(config, conn, "auto");
  const auto items = db::failed_items(conn, options.limit);
  if (options.json) {
    Json list = Json::array();
    for (const auto& item : items) list.push_back(item_json(item));
    std::cout << dump_json({{"items", std::move(list)}}, 2) << "\n";
    return 0;
  }
  if (items.empty()) {
    std::cout << "no failed items\n";
    return 0;
  }
  std::cout << items_text(items, view);
  std::cout << fmt::format(
      "{} failed item{} shown; requeue with: timewarp retry ID... (or --all-failed)\n",
      items.size(), items.size() == 1 ? "" : "s");
  return 0;
}

int run_retry(const Config& config, const RetryOptions& options) {
  if (options.all_failed == !options.ids.empty()) {
    std::cerr << "timewarp retry: give item ids or --all-failed (not both)\n";
    return 2;
  }
  db::Connection conn(config.database);
  if (options.all_failed) {
    const auto n = db::retry_all_failed(conn);
    std::cout << fmt::format("requeued {} failed item{}\n", n, n == 1 ? "" : "s");
    return 0;
  }
  const auto outcome = db::retry_failed(conn, options.ids);
  for (const auto& [id, status] : outcome.refused) {
    if (status.empty()) {
      std::cerr << fmt::format("timewarp retry: no item {}\n", id);
    } else {
      std::cerr << fmt::format("timewarp retry: item {} is {}, not FAILED; left as it is\n", id,
                               status);
    }
  }
  std::cout << fmt::format("requeued {} item{}\n", outcome.requeued.size(),
                           outcome.requeued.size() == 1 ? "" : "s");
  return outcome.refused.empty() ? 0 : 1;
}

int run_prune(const Config& config, const PruneOptions& options) {
  const double age = options.older_than.value_or(config.prune_age);
  db::Connection conn(config.database);
  const auto items = db::prune_completed(conn, age, options.batch_rows);
  const auto audit = db::prune_audit(conn, age, options.batch_rows);
  std::cout << fmt::format(
      "removed {} completed item{} finished more than {} ago, {} batch record{} and {} "
      "scheduler record{}\n",
      items, items == 1 ? "" : "s", duration(age), audit.batches, audit.batches == 1 ? "" : "s",
      audit.schedulers, audit.schedulers == 1 ? "" : "s");
  return 0;
}

}  // namespace

namespace {

// A subcommand that lists queue items (--limit N, --json) and runs `runner` with the
// missing-schema hint. Returns it and its options, for more options of its own.
template <class Options>
std::pair<CLI::App*, std::shared_ptr<Options>> add_listing(
    CLI::App& app, Config& config, std::function<int()>& run, const char* name, const char* about,
    const char* limit_help, int (*runner)(const Config&, const Options&)) {
  auto options = std::make_shared<Options>();
  auto* command = app.add_subcommand(name, about);
  command->add_option("--limit", options->limit, limit_help)
      ->transform(number_in<int>(0))
      ->capture_default_str();
  command->add_flag("--json", options->json, "one JSON document");
  command->callback([&config, &run, options, runner] {
    run = [&config, options, runner] {
      return with_schema_hint([&] { return runner(config, *options); });
    };
  });
  return {command, options};
}

}  // namespace

void add_status_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  auto status_options = std::make_shared<StatusOptions>();
  auto* status = app.add_subcommand(
      "status",
      "backlog, progress, schedulers and recent failures of the queue; the archive's size and "
      "what retention would reclaim, when backup_root is set");
  status->add_flag("--json", status_options->json,
                   "one JSON document (with --watch: one per line)");
  status->add_flag("--watch,-w", status_options->watch,
                   "redraw every --interval until interrupted");
  status->add_option("--interval", status_options->interval, "seconds between --watch frames")
      ->transform(number_in(0.1, 3600.0))
      ->capture_default_str();
  status
      ->add_option("--count", status_options->count,
                   "stop --watch after this many frames (0: never)")
      ->transform(number_in<int>(0))
      ->capture_default_str();
  status->add_option("--failures", status_options->failures, "recent failures to list")
      ->transform(number_in(0, 100000))
      ->capture_default_str();
  status->add_option("--color", status_options->color, "auto (on a terminal), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  status->callback([&, status_options] {
    run = [&, status_options] {
      return with_schema_hint([&] {
        return status_options->watch ? run_status_watch(config, *status_options)
                                     : run_status_once(config, *status_options);
      });
    };
  });

  auto [history, history_options] = add_listing<HistoryOptions>(
      app, config, run, "history",
      "every queue item of a path (and MOVEs to it), with attempts and errors",
      "newest items shown (0: all)", run_history);
  history->add_option("path", history_options->path, "file path")->required();
  add_listing<FailedOptions>(app, config, run, "failed",
                             "failed items, most recent first, with their errors",
                             "items shown (0: all)", run_failed);

  auto retry_options = std::make_shared<RetryOptions>();
  auto* retry = app.add_subcommand(
      "retry", "requeue FAILED items (claimable at once, with a fresh attempt budget)");
  retry->add_option("ids", retry_options->ids, "item ids (see timewarp failed)")
      ->transform(number_in<std::int64_t>(1));
  retry->add_flag("--all-failed", retry_options->all_failed, "every FAILED item");
  retry->callback([&, retry_options] {
    run = [&, retry_options] {
      return with_schema_hint([&] { return run_retry(config, *retry_options); });
    };
  });

  auto prune_options = std::make_shared<PruneOptions>();
  auto* prune = app.add_subcommand(
      "prune",
      "remove COMPLETED items older than --older-than (default prune_age) in small batches");
  prune
      ->add_option("--older-than", prune_options->older_than,
                   "seconds since the item finished (default: prune_age)")
      ->transform(number_in(0.0, 3650.0 * 86400.0));
  prune->add_option("--batch-rows", prune_options->batch_rows, "rows deleted per statement")
      ->transform(number_in(1, 1000000))
      ->capture_default_str();
  prune->callback([&, prune_options] {
    run = [&, prune_options] {
      return with_schema_hint([&] { return run_prune(config, *prune_options); });
    };
  });
}

}  // namespace tw::cli
