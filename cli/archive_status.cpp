#include "cli/archive_status.hpp"

#include <array>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "cli/archive_commands.hpp"
#include "common/time.hpp"
#include "objstore/pack_store.hpp"

namespace tw::cli {
namespace {

namespace ar = tw::archive;

// What the pack store does not hold yet, when one is configured.
void read_shipping(const Config& config, const ar::Store& store, ArchiveStatus& out) {
  auto target = objstore::store_target(config);
  if (!target) {
    out.shipping_error = target.error();
    return;
  }
  if (!*target) return;
  const auto& t = **target;
  out.store = objstore::where(t.bucket, t.prefix);
  auto backlog = store.ship_backlog(out.store);
  if (!backlog) {
    out.shipping_error = backlog.error();
    return;
  }
  out.shipping = *backlog;
}

// The figures of `status`, or the first failure's message.
std::string read_into(const Config& config, ArchiveStatus& out, std::int64_t now) {
  if (auto zone = ar::use_time_zone(config.retention_timezone); !zone) return zone.error();
  auto store = open_store(config);
  if (!store) return store.error();
  out.format = static_cast<int>(store->format());
  auto policies = ar::retention_policies(config);
  if (!policies) return policies.error();
  auto plan = store->plan_forget_space(*policies, now, {});
  if (!plan) return plan.error();
  out.space = plan->space;
  out.unmeasured = plan->unmeasured;
  out.versions = plan->report.versions;
  out.removable = plan->report.removed;
  out.removable_paths = plan->report.whole_paths;
  read_shipping(config, *store, out);
  auto last = store->last_collection();
  if (!last) return last.error();
  out.last_collection = *last;
  if (*last) {
    out.collection_finished_at = ar::format_time_ns((*last)->finished_ns);
    out.collection_age = static_cast<double>(now - (*last)->finished_ns) / 1e9;
  }
  return {};
}

}  // namespace

// The collection's counts, by the names its JSON gives them.
constexpr std::pair<const char*, std::uint64_t archive::CollectReport::*> kCollectionCounts[] = {
    {"blobs", &archive::CollectReport::blobs},
    {"blobs_condemned", &archive::CollectReport::blobs_condemned},
    {"blobs_removed", &archive::CollectReport::blobs_swept},
    {"bytes_removed", &archive::CollectReport::bytes_swept},
    {"packs_deleted", &archive::CollectReport::packs_deleted},
    {"packs_rewritten", &archive::CollectReport::packs_rewritten},
    {"packs_truncated", &archive::CollectReport::packs_truncated},
    {"packs_busy", &archive::CollectReport::packs_busy},
    {"bytes_copied", &archive::CollectReport::bytes_copied},
    {"bytes_reclaimed", &archive::CollectReport::bytes_reclaimed},
    {"catalog_bytes_reclaimed", &archive::CollectReport::catalog_bytes_reclaimed}};

nlohmann::json collection_json(const archive::CollectReport& r) {
  nlohmann::json out = {{"collection", r.collection},
                        {"seconds", static_cast<double>(r.finished_ns - r.started_ns) / 1e9}};
  for (const auto& [name, count] : kCollectionCounts) out[name] = r.*count;
  return out;
}

ArchiveStatus read_archive_status(const Config& config) {
  ArchiveStatus out;
  out.root = config.backup_root;
  const auto started = std::chrono::steady_clock::now();
  const std::int64_t now = now_ns();
  out.read_at = ar::format_time_ns(now);
  out.read_ns = now;
  if (std::string error = read_into(config, out, now); !error.empty()) {
    ArchiveStatus failed;
    failed.root = out.root;
    failed.read_at = out.read_at;
    failed.read_ns = out.read_ns;
    failed.error = std::move(error);
    out = std::move(failed);
  }
  out.read_seconds = seconds_of(std::chrono::steady_clock::now() - started);
  return out;
}

std::string bytes_text(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} byte{}", bytes, bytes == 1 ? "" : "s");
  static constexpr std::array kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (value >= 1023.95 && unit + 1 < kUnits.size()) {  // never "1024.0 KiB"
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace tw::cli
