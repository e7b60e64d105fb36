#include "cli/retention_commands.hpp"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "cli/archive_commands.hpp"
#include "common/escape.hpp"
#include "common/protocol.hpp"
#include "common/time.hpp"

namespace tw {
namespace {

namespace ar = tw::archive;

struct ForgetArgs {
  bool dry_run = false;
  bool json = false;
  std::string now;  // empty: the clock
};

int fail(std::string_view message, int code) {
  std::cerr << "timewarp forget: " << shown_text(message) << "\n";
  return code;
}

// One version the policy would remove.
struct Removal {
  std::string path;
  ar::Version version;
};

struct Plan {
  ar::KeptMoments kept;
  std::vector<Removal> removals;
  std::uint64_t paths = 0;          // archived paths looked at
  std::uint64_t versions = 0;       // their versions
  std::uint64_t whole_paths = 0;    // paths that would lose every version
  std::uint64_t content_bytes = 0;  // file bytes of the removed versions (before dedup)
};

Result<Plan> plan_forget(const ar::Store& store, const ar::RetentionPolicy& policy,
                         std::int64_t now_ns) {
  Plan plan;
  plan.kept = ar::kept_moments(policy, now_ns);
  auto paths = store.paths_within("/");
  if (!paths) return Error{paths.error()};
  for (const auto& path : *paths) {
    auto history = store.versions(path);
    if (!history) return Error{history.error()};
    if (history->empty()) continue;
    ++plan.paths;
    plan.versions += history->size();
    const auto keep = ar::kept_versions(*history, plan.kept);
    std::size_t removed = 0;
    for (std::size_t i = 0; i < keep.size(); ++i) {
      if (keep[i]) continue;
      const ar::Version& v = (*history)[i];
      if (v.is_file()) plan.content_bytes += v.size;
      plan.removals.push_back({path, v});
      ++removed;
    }
    if (removed == history->size()) ++plan.whole_paths;
  }
  return plan;
}

std::string policy_text(const Config& config) {
  const std::string zone = config.retention_timezone.empty() ? "local" : config.retention_timezone;
  return fmt::format(
      "every version of the last {:g} s, then the moments at {} full hours, {} midnights, {} "
      "Mondays, {} firsts of a month, {} firsts of January (time zone: {})",
      config.keep_within, config.keep_hourly, config.keep_daily, config.keep_weekly,
      config.keep_monthly, config.keep_yearly, zone);
}

void print_human(const Config& config, const Plan& plan, std::int64_t now_ns) {
  std::cout << fmt::format("policy at {}: {}\n", ar::format_time_ns(now_ns), policy_text(config));
  for (const auto& r : plan.removals) {
    std::cout << fmt::format("would remove {} version {} ({}, archived {}, {} bytes)\n",
                             shown_path(r.path), r.version.number, to_string(r.version.op),
                             ar::format_time_ns(r.version.archived_at_ns), r.version.size);
  }
  std::cout << fmt::format(
      "would remove {} of {} versions ({} bytes of file content before deduplication); {} of {} "
      "paths would leave the archive whole\n",
      plan.removals.size(), plan.versions, plan.content_bytes, plan.whole_paths, plan.paths);
}

void print_json(const Config& config, const Plan& plan, std::int64_t now_ns) {
  nlohmann::json out;
  out["now"] = ar::format_time_ns(now_ns);
  out["policy"] = {{"keep_within_s", config.keep_within},  {"keep_hourly", config.keep_hourly},
                   {"keep_daily", config.keep_daily},      {"keep_weekly", config.keep_weekly},
                   {"keep_monthly", config.keep_monthly},  {"keep_yearly", config.keep_yearly},
                   {"timezone", config.retention_timezone}};
  auto& instants = out["kept_instants"] = nlohmann::json::array();
  for (const auto at : plan.kept.instants) instants.push_back(ar::format_time_ns(at));
  out["kept_from"] = ar::format_time_ns(plan.kept.from_ns.value_or(now_ns));
  auto& removals = out["remove"] = nlohmann::json::array();
  for (const auto& r : plan.removals) {
    // Paths as the queue escapes them: any byte Linux allows, in valid JSON.
    removals.push_back({{"path", escape_bytes(r.path)},
                        {"version", r.version.number},
                        {"op", std::string(to_string(r.version.op))},
                        {"archived_at", ar::format_time_ns(r.version.archived_at_ns)},
                        {"size", r.version.size}});
  }
  out["paths"] = plan.paths;
  out["versions"] = plan.versions;
  out["versions_removed"] = plan.removals.size();
  out["paths_removed_whole"] = plan.whole_paths;
  out["content_bytes_removed"] = plan.content_bytes;
  std::cout << out.dump(2) << "\n";
}

int run_forget(const Config& config, const ForgetArgs& args) {
  if (!args.dry_run) {
    return fail(
        "only --dry-run is available: this release lists what the policy would remove and "
        "keeps every version",
        2);
  }
  if (auto zone = ar::use_time_zone(config.retention_timezone); !zone) {
    return fail(zone.fault().message, 2);
  }
  std::int64_t now_ns = tw::now_ns();
  if (!args.now.empty()) {
    auto parsed = ar::parse_time_ns(args.now);
    if (!parsed) return fail(fmt::format("--now: {}", parsed.error()), 2);
    now_ns = *parsed;
  }
  auto store = open_store(config);
  if (!store) return fail(store.error(), 2);
  auto plan = plan_forget(*store, ar::retention_policy(config), now_ns);
  if (!plan) return fail(plan.error(), 1);
  if (args.json) {
    print_json(config, *plan, now_ns);
  } else {
    print_human(config, *plan, now_ns);
  }
  std::cout.flush();
  return 0;
}

}  // namespace

void add_retention_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<ForgetArgs>();
  auto* forget = app.add_subcommand(
      "forget", "list the versions the retention policy (keep_* keys) would remove now");
  forget->fallthrough();
  forget->add_flag("-n,--dry-run", args->dry_run, "only list what would go (required for now)");
  forget->add_flag("--json", args->json, "print the list as JSON");
  forget->add_option("--now", args->now,
                     "apply the policy as of TIME instead of now (what would be gone by then)");
  forget->footer("Example: timewarp forget --dry-run --backup-root /srv/timewarp");
  forget->callback(
      [&config, &run, args] { run = [&config, args] { return run_forget(config, *args); }; });
}

}  // namespace tw
