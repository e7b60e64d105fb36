#include "monitor/ship_runs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/time.hpp"

namespace tw::monitor {
namespace {

// What a run needs of the configuration: the archive, the store (its prefix defaults to
// host_id), how much of the shipped packs to keep, and where to log.
constexpr std::array<std::string_view, 10> kRunKeys = {
    "backup_root",  "host_id",      "store_endpoint",         "store_bucket",
    "store_prefix", "store_region", "store_credentials_file", "local_packs_size",
    "log_level",    "log_file"};

constexpr auto kFirstRun = std::chrono::minutes(1);

bool off(const Config& config) {
  return config.store_endpoint.empty() || config.ship_interval <= 0;
}

// Nothing to ship before the archivers have made the archive.
bool archive_made(const Config& config) {
  struct stat st {};
  return ::stat((config.backup_root + "/FORMAT").c_str(), &st) == 0;
}

// `timewarp ship`, with the secret keys (the store's access keys) in their environment
// variables.
BackgroundRuns::Run ship_run(const Config& config) {
  return {.args = {"ship", "--low-priority"}, .keys = kRunKeys, .env = secret_env(config)};
}

}  // namespace

ShipRuns::ShipRuns(std::shared_ptr<Launcher> launcher, std::string timewarp)
    : BackgroundRuns(std::move(launcher), std::move(timewarp), "shipping run") {}

std::optional<ShipRuns::Clock::time_point> ShipRuns::due(const Config& config) const {
  if (off(config) || running()) return std::nullopt;
  return next_;
}

void ShipRuns::tick(const Config& config) {
  if (off(config) || running()) return;
  const auto interval = seconds_ms(config.ship_interval);
  if (!next_) {
    next_ = started_ + std::min<Clock::duration>(interval, kFirstRun);
  }
  if (Clock::now() < *next_) return;
  next_ = Clock::now() + interval;
  if (!archive_made(config)) return;
  start(config, ship_run(config), kStoreNetworkEnv);
}

void ShipRuns::final_run(const Config& config, std::chrono::milliseconds limit) {
  if (off(config) || !archive_made(config)) return;
  spdlog::info("shipping what is not shipped yet before stopping (at most {} s)",
               std::chrono::duration_cast<std::chrono::seconds>(limit).count());
  if (!run_now(config, ship_run(config), kStoreNetworkEnv, limit)) {
    ended_ = "the last shipping run did not end (stopped, or it could not start)";
  }
}

void ShipRuns::ended(int status, const std::string& last_line) {
  if (status == 0) {
    ended_ = std::string();
  } else {
    ended_ = last_line.empty() ? fmt::format("exit status {}", status) : last_line;
  }
}

std::optional<std::string> ShipRuns::take_ended() { return std::exchange(ended_, std::nullopt); }

}  // namespace tw::monitor
