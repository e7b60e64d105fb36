#include "monitor/retention_runs.hpp"

#include <sys/stat.h>

#include <array>
#include <string_view>
#include <utility>

#include "archive/store.hpp"
#include "common/time.hpp"

namespace tw::monitor {
namespace {

// What a run needs of the configuration: the archive, the policy, where to log, and the pack
// store (its collection rewrites packs given back once shipped from the store's copy).
// clang-format off
constexpr std::array<std::string_view, 19> kRunKeys = {
    "backup_root",      "keep_within",    "keep_hourly",    "keep_daily",
    "keep_weekly",      "keep_monthly",   "keep_yearly",    "retention_timezone",
    "retention_folder", "log_level",      "log_file",       "host_id",
    "store_endpoint",   "store_bucket",   "store_prefix",   "store_region",
    "store_credentials_file", "cache_dir", "cache_size"};
// clang-format on

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
    : BackgroundRuns(std::move(launcher), std::move(timewarp), "retention run") {}

std::optional<RetentionRuns::Clock::time_point> RetentionRuns::due(const Config& config) const {
  if (config.retention_interval <= 0 || running()) return std::nullopt;
  return next_;
}

void RetentionRuns::tick(const Config& config) {
  if (config.retention_interval <= 0 || running()) return;
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
  start(config,
        {.args = {"forget", "--summary", "--low-priority"},
         .keys = kRunKeys,
         .env = secret_env(config)},
        kStoreNetworkEnv);
  next_ = Clock::now() + interval;
}

}  // namespace tw::monitor
