#include "monitor/retention_runs.hpp"

#include <sys/stat.h>

#include <array>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "archive/store.hpp"
#include "common/time.hpp"

namespace tw::monitor {
namespace {

// What a run needs of the configuration: the archive, the policy, and where to log.
constexpr std::array<std::string_view, 11> kRunKeys = {
    "backup_root", "keep_within",        "keep_hourly",      "keep_daily",
    "keep_weekly", "keep_monthly",       "keep_yearly",      "retention_timezone",
    "retention_folder", "log_level", "log_file"};

// The wall-clock instant of the archive's last collection, if it had one.
std::optional<std::int64_t> last_collection_ns(const std::string& backup_root) {
  auto store = archive::Store::open(backup_root, archive::Store::Mode::ReadOnly);
  if (!store) return std::nullopt;  // not made yet, or unreadable: the run will say
  auto last = store->last_collection();
  if (!last || !*last) return std::nullopt;
  return (*last)->finished_ns;
}

}  // namespace

RetentionRuns::RetentionRuns(std::shared_ptr<Launcher> launcher, std::string timewarp)
    : launcher_(std::move(launcher)),
      timewarp_(timewarp.empty() ? sibling_executable("timewarp") : std::move(timewarp)) {}

RetentionRuns::~RetentionRuns() { stop(); }

std::optional<RetentionRuns::Clock::time_point> RetentionRuns::due(const Config& config) const {
  if (config.retention_interval <= 0 || child_) return std::nullopt;
  return next_;
}

void RetentionRuns::tick(const Config& config) {
  if (config.retention_interval <= 0 || child_) return;
  const auto interval = seconds_ms(config.retention_interval);
  if (!next_) {
    const auto last = last_collection_ns(config.backup_root);
    next_ = last ? Clock::now() + std::chrono::nanoseconds(*last - now_ns()) + interval
                 : started_ + interval;
  }
  if (Clock::now() < *next_) return;
  // Nothing to thin before the archivers have made the archive.
  if (struct stat st{}; ::stat((config.backup_root + "/FORMAT").c_str(), &st) != 0) {
    next_ = Clock::now() + interval;
    return;
  }
  // Someone else (an operator's timewarp gc) may have collected meanwhile.
  if (const auto last = last_collection_ns(config.backup_root)) {
    const auto since = std::chrono::nanoseconds(now_ns() - *last);
    if (since < interval) {
      next_ = Clock::now() + (interval - since);
      return;
    }
  }
  start(config);
  next_ = Clock::now() + interval;
}

void RetentionRuns::start(const Config& config) {
  LaunchSpec spec;
  spec.executable = timewarp_;
  spec.args = {"forget", "--summary", "--low-priority"};
  const auto keys = config_to_args(config, kRunKeys);
  spec.args.insert(spec.args.end(), keys.begin(), keys.end());
  // The monitor's own file, or none: never one the child would find on its own.
  spec.args.push_back(config.config_file.empty() ? "--no-config" : "--config=" + config.config_file);
  // No database credentials: forget reads only the archive.
  spec.inherit_env = std::vector<std::string>{"PATH", "TZ", "LANG", "LC_*", "HOME", "TMPDIR"};
  try {
    child_ = launcher_->launch(spec);
  } catch (const std::exception& e) {
    spdlog::error("retention run: {}; trying again in {:g} s", e.what(), config.retention_interval);
    return;
  }
  last_line_.clear();
  spdlog::info("retention run started (timewarp forget, pid {})", child_->pid());
}

int RetentionRuns::output_fd() const { return child_ ? child_->stdout_fd() : -1; }

bool RetentionRuns::has_buffered_line() const { return child_ && child_->has_buffered_line(); }

void RetentionRuns::on_output() {
  if (!child_) return;
  // A line over 1 MiB (read_line discards it) is not logged.
  const auto exited = drain_lines(*child_, [this](std::optional<std::string> line) {
    if (!line) return;
    spdlog::info("retention run: {}", *line);
    last_line_ = std::move(*line);
  });
  if (exited) finished(*exited);
}

void RetentionRuns::finished(int status) {
  if (status == 0) {
    spdlog::info("retention run finished");
  } else {
    spdlog::error("retention run failed (exit status {}{}); trying again in an interval", status,
                  last_line_.empty() ? "" : ": " + last_line_);
  }
  child_.reset();
}

void RetentionRuns::stop() {
  if (!child_) return;
  // Safe at any instant: forget's removals and the collection are kill-safe.
  spdlog::info("stopping the retention run (pid {})", child_->pid());
  child_->terminate(std::chrono::seconds(2));
  child_.reset();
}

}  // namespace tw::monitor
