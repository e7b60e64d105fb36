#include "cli/ship_command.hpp"

#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "archive/store.hpp"
#include "cli/archive_commands.hpp"
#include "cli/archive_status.hpp"
#include "cli/subcommand.hpp"
#include "common/host.hpp"
#include "objstore/pack_store.hpp"

namespace tw::cli {
namespace {

namespace ar = tw::archive;

constexpr std::string_view kCmd = "ship";

struct ShipArgs {
  bool json = false;
  bool low_priority = false;  // nice 19 and the lowest I/O priority (the monitor's runs)
};

std::string report_text(const ar::ShipReport& r, const std::string& where) {
  std::string out =
      fmt::format("shipped {} pack{} ({}) to {}", r.packs_shipped, r.packs_shipped == 1 ? "" : "s",
                  bytes_text(r.bytes_shipped), where);
  if (r.packs_removed > 0) out += fmt::format(", removed {} from it", r.packs_removed);
  if (r.packs_busy > 0) {
    out += fmt::format("; {} still written to (shipped as far as committed)", r.packs_busy);
  }
  if (!r.catalog.empty()) {
    out += fmt::format("; the catalog as {} ({})", r.catalog, bytes_text(r.catalog_bytes));
  } else if (r.catalog_unchanged) {
    out += "; the catalog unchanged since it was last shipped";
  }
  if (r.packs_given_back > 0) {
    out += fmt::format("; gave back {} pack{} ({}) of the local disk", r.packs_given_back,
                       r.packs_given_back == 1 ? "" : "s", bytes_text(r.bytes_given_back));
  }
  return out + "\n";
}

nlohmann::json report_json(const ar::ShipReport& r, const std::string& where) {
  return {{"store", where},
          {"packs_shipped", r.packs_shipped},
          {"bytes_shipped", r.bytes_shipped},
          {"packs_removed", r.packs_removed},
          {"packs_busy", r.packs_busy},
          {"catalog", r.catalog.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.catalog)},
          {"catalog_bytes", r.catalog_bytes},
          {"catalog_unchanged", r.catalog_unchanged},
          {"packs_given_back", r.packs_given_back},
          {"bytes_given_back", r.bytes_given_back}};
}

int run_ship(const Config& config, const ShipArgs& args) {
  auto target = objstore::store_target(config);
  if (!target) return command_failed(kCmd, target.error(), 2);
  if (!*target) {
    return command_failed(kCmd, "no pack store is configured (store_endpoint is empty)", 2);
  }
  auto bucket = objstore::Bucket::open((*target)->bucket);
  if (!bucket) return command_failed(kCmd, bucket.error(), 2);
  auto store = open_changing(config);
  if (!store) return command_failed(kCmd, store.error(), 2);
  if (args.low_priority) {
    if (const auto failed = lower_priority(); !failed.empty()) {
      spdlog::warn("ship: could not lower its priority: {}", failed);
    }
  }
  objstore::BucketPackStore packs(std::move(*bucket), (*target)->prefix);
  if (auto made = packs.bucket().create(); !made) {
    return command_failed(kCmd, fmt::format("{}: {}", packs.where(), made.failure().message), 1);
  }
  ar::ShipReport report;
  const ar::Done shipped = store->ship(packs, report, config.local_packs_size);
  if (args.json) {
    auto doc = report_json(report, packs.where());
    doc["error"] = shipped ? nlohmann::json(nullptr) : nlohmann::json(shipped.error());
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << report_text(report, packs.where());
  }
  std::cout.flush();
  return shipped ? 0 : command_failed(kCmd, shipped.error(), 1);
}

}  // namespace

void add_ship_command(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<ShipArgs>();
  auto* ship = add_archive_subcommand(
      app, "ship", "copy the archive's sealed packs to the pack store (store_* keys)");
  ship->add_flag("--json", args->json, "print the figures as JSON");
  ship->add_flag("--low-priority", args->low_priority,
                 "run at the lowest CPU and I/O priority (as the monitor's runs do)");
  run_when_parsed(*ship, run, [&config, args] { return run_ship(config, *args); });
}

}  // namespace tw::cli
