#include "cli/retention_commands.hpp"

#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "archive/retention.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "cli/archive_commands.hpp"
#include "cli/archive_status.hpp"
#include "cli/subcommand.hpp"
#include "common/escape.hpp"
#include "common/host.hpp"
#include "common/protocol.hpp"
#include "common/time.hpp"

namespace tw {
namespace {

namespace ar = tw::archive;

struct ForgetArgs {
  bool dry_run = false;
  bool json = false;
  bool no_gc = false;
  bool summary = false;       // totals only, not each version
  bool low_priority = false;  // nice 19 and the lowest I/O priority (the monitor's runs)
  std::string now;            // empty: the clock
};

int fail(std::string_view command, std::string_view message, int code) {
  return command_failed(command, message, code);
}

// One version the policy removes (or would).
struct Removal {
  std::string path;
  ar::Version version;
};

double within_seconds(const ar::RetentionPolicy& p) {
  return static_cast<double>(p.keep_within_ns) / 1e9;
}

std::string policy_text(const ar::RetentionPolicy& p, const std::string& zone) {
  return fmt::format(
      "every version of the last {:g} s, then the moments at {} full hours, {} midnights, {} "
      "Mondays, {} firsts of a month, {} firsts of January (time zone: {})",
      within_seconds(p), p.keep_hourly, p.keep_daily, p.keep_weekly, p.keep_monthly, p.keep_yearly,
      zone.empty() ? "local" : zone);
}

// The policy and the moments kept, as `forget --json` shows them for the archive's scope
// and for each folder's.
nlohmann::json scope_json(const ar::RetentionPolicy& p, const std::string& zone,
                          const ar::KeptMoments& kept, std::int64_t now_ns) {
  nlohmann::json out;
  out["policy"] = {{"keep_within_s", within_seconds(p)},
                   {"keep_hourly", p.keep_hourly},
                   {"keep_daily", p.keep_daily},
                   {"keep_weekly", p.keep_weekly},
                   {"keep_monthly", p.keep_monthly},
                   {"keep_yearly", p.keep_yearly},
                   {"timezone", zone}};
  auto& instants = out["kept_instants"] = nlohmann::json::array();
  for (const auto at : kept.instants) instants.push_back(ar::format_time_ns(at));
  out["kept_from"] = ar::format_time_ns(kept.from_ns.value_or(now_ns));
  return out;
}

// `space`: the archive's figures with the removed versions left out, when measured.
void print_human(const Config& config, const ar::RetentionPolicies& policies,
                 const ar::ForgetReport& report, const std::vector<Removal>& removals,
                 const ar::SpaceReport* space, std::int64_t now_ns, bool dry_run) {
  const char* verb = dry_run ? "would remove" : "removed";
  const std::string& zone = config.retention_timezone;
  std::cout << fmt::format("policy at {}: {}\n", ar::format_time_ns(now_ns),
                           policy_text(policies.archive, zone));
  for (const auto& [folder, policy] : policies.folders) {
    std::cout << fmt::format("policy of {}: {}\n", shown_path(folder), policy_text(policy, zone));
  }
  for (const auto& r : removals) {
    std::cout << fmt::format("{} {} version {} ({}, archived {}, {} bytes)\n", verb,
                             shown_path(r.path), r.version.number, to_string(r.version.op),
                             ar::format_time_ns(r.version.archived_at_ns), r.version.size);
  }
  std::cout << fmt::format(
      "{} {} of {} versions ({} bytes of file content before deduplication); {} of {} "
      "paths {} the archive whole\n",
      verb, report.removed, report.versions, report.content_bytes, report.whole_paths, report.paths,
      dry_run ? "would leave" : "left");
  if (space != nullptr && space->freed_bytes) {
    // After deduplication: content a kept version names too stays.
    std::cout << fmt::format(
        "{} about {} of pack space once collected ({} blobs no kept version names)\n",
        dry_run ? "would free" : "frees", cli::bytes_text(*space->freed_bytes),
        space->freed_blobs.value_or(0));
  }
}

nlohmann::json report_json(const Config& config, const ar::RetentionPolicies& policies,
                           const ar::ForgetReport& report, const std::vector<Removal>& removals,
                           const ar::SpaceReport* space, std::int64_t now_ns) {
  const std::string& zone = config.retention_timezone;
  nlohmann::json out = scope_json(policies.archive, zone, report.kept.archive, now_ns);
  out["now"] = ar::format_time_ns(now_ns);
  // Each folder with a policy of its own: that policy (a folder recorded by an earlier run
  // and no longer configured takes the policy of the scope holding it).
  auto& folders = out["folders"] = nlohmann::json::array();
  for (const auto& [folder, kept] : report.kept.folders) {
    auto one = scope_json(policies.of(folder), zone, kept, now_ns);
    one["folder"] = escape_bytes(folder);
    folders.push_back(std::move(one));
  }
  auto& listed = out["remove"] = nlohmann::json::array();
  for (const auto& r : removals) {
    // Paths as the queue escapes them: any byte Linux allows, in valid JSON.
    listed.push_back({{"path", escape_bytes(r.path)},
                      {"version", r.version.number},
                      {"op", std::string(to_string(r.version.op))},
                      {"archived_at", ar::format_time_ns(r.version.archived_at_ns)},
                      {"size", r.version.size}});
  }
  out["paths"] = report.paths;
  out["versions"] = report.versions;
  out["versions_removed"] = report.removed;
  out["paths_removed_whole"] = report.whole_paths;
  out["content_bytes_removed"] = report.content_bytes;
  // Stored bytes only the removed versions name (null: not measured, or a format-1 archive).
  out["bytes_freed"] = nullptr;
  if (space != nullptr && space->freed_bytes) out["bytes_freed"] = *space->freed_bytes;
  return out;
}

std::string collect_text(const ar::CollectReport& r) {
  return fmt::format(
      "collection {}: {} blobs, {} removed ({} bytes), {} condemned (removed by the next "
      "collection unless used again); packs: {} deleted, {} rewritten ({} bytes copied), {} cut "
      "back, {} in use left alone; {} bytes of packs and {} of catalog given back in {:.2f} s\n",
      r.collection, r.blobs, r.blobs_swept, r.bytes_swept, r.blobs_condemned, r.packs_deleted,
      r.packs_rewritten, r.bytes_copied, r.packs_truncated, r.packs_busy, r.bytes_reclaimed,
      r.catalog_bytes_reclaimed, static_cast<double>(r.finished_ns - r.started_ns) / 1e9);
}

// The PATH argument and the archive opened to change it; a failure is printed (exit 2).
struct Target {
  std::string path;
  std::optional<ar::Store> store;
};
Target path_and_store(std::string_view command, const Config& config, const std::string& arg,
                      bool escaped) {
  auto path = command_line_path(arg, escaped);
  if (!path) {
    fail(command, path.error(), 2);
    return {};
  }
  auto store = open_changing(config);
  if (!store) {
    fail(command, store.error(), 2);
    return {};
  }
  return {std::move(*path), std::move(*store)};
}

// The collection after versions were removed, unless `skip`.
ar::Expected<std::optional<ar::CollectReport>> collect_after(ar::Store& store, bool skip) {
  if (skip) return std::optional<ar::CollectReport>();
  auto gc = store.collect({});
  if (!gc) return ar::retry(fmt::format("versions removed; collection failed: {}", gc.error()));
  return std::optional<ar::CollectReport>(*gc);
}

// What forget removed (or, in a dry run, would remove) and, when `measured`, the archive's
// figures with those versions left out: what removing them frees.
ar::Expected<ar::ForgetPlan> apply_policy(ar::Store& store, const ar::RetentionPolicies& policy,
                                          std::int64_t now_ns, const ar::ForgetOptions& options,
                                          bool dry_run, bool measured) {
  if (dry_run) return store.plan_forget_space(policy, now_ns, options);
  // Measured before anything goes: the plan reads every history once more, about what the
  // removal itself costs (0.4 s beside 0.44 s on 100 000 versions).
  ar::ForgetPlan applied;
  if (measured) {
    ar::ForgetOptions unlisted;  // each version is listed once, as it goes
    unlisted.cancelled = options.cancelled;
    auto plan = store.plan_forget_space(policy, now_ns, unlisted);
    if (!plan) return plan.fault();
    applied = std::move(*plan);
  }
  auto report = store.forget(policy, now_ns, options);
  if (!report) return report.fault();
  applied.report = std::move(*report);
  return applied;
}

int run_forget(const Config& config, const ForgetArgs& args) {
  constexpr std::string_view kCmd = "forget";
  if (auto zone = ar::use_time_zone(config.retention_timezone); !zone) {
    return fail(kCmd, zone.fault().message, 2);
  }
  std::int64_t now_ns = tw::now_ns();
  if (!args.now.empty()) {
    auto parsed = ar::parse_time_ns(args.now);
    if (!parsed) return fail(kCmd, fmt::format("--now: {}", parsed.error()), 2);
    now_ns = *parsed;
  }
  auto policies = ar::retention_policies(config);
  if (!policies) return fail(kCmd, policies.error(), 2);
  auto store = args.dry_run ? open_store(config) : open_changing(config);
  if (!store) return fail(kCmd, store.error(), 2);
  if (args.low_priority) {
    if (const auto failed = lower_priority(); !failed.empty()) {
      spdlog::warn("forget: could not lower its priority: {}", failed);
    }
  }
  std::vector<Removal> removals;
  ar::ForgetOptions options;
  if (!args.summary) {
    options.on_removal = [&](const std::string& path, const ar::Version& v) {
      removals.push_back({path, v});
    };
  }
  // With the collection, its figures say what went; without it, the figure measured first.
  auto plan = apply_policy(*store, *policies, now_ns, options, args.dry_run, args.no_gc);
  if (!plan) return fail(kCmd, plan.error(), 1);
  if (!plan->unmeasured.empty()) {
    spdlog::warn("forget: cannot tell what the removal frees: {}", plan->unmeasured);
  }
  const ar::ForgetReport& report = plan->report;
  const ar::SpaceReport* space = plan->space ? &*plan->space : nullptr;
  auto gc = collect_after(*store, args.dry_run || args.no_gc);
  if (!gc) return fail(kCmd, gc.error(), 1);
  const std::optional<ar::CollectReport>& collected = *gc;
  if (args.json) {
    auto out = report_json(config, *policies, report, removals, space, now_ns);
    if (args.summary) out.erase("remove");
    if (collected) out["collection"] = cli::collection_json(*collected);
    std::cout << out.dump(2) << "\n";
  } else {
    print_human(config, *policies, report, removals, space, now_ns, args.dry_run);
    if (collected) std::cout << collect_text(*collected);
  }
  std::cout.flush();
  return 0;
}

struct GcArgs {
  bool json = false;
  double rewrite_share = 0.2;
};

int run_gc(const Config& config, const GcArgs& args) {
  auto store = open_changing(config);
  if (!store) return fail("gc", store.error(), 2);
  ar::CollectOptions options;
  options.rewrite_share = args.rewrite_share;
  options.progress = [](std::string_view line) { spdlog::info("gc: {}", line); };
  auto report = store->collect(options);
  if (!report) return fail("gc", report.error(), 1);
  if (args.json) {
    std::cout << cli::collection_json(*report).dump(2) << "\n";
  } else {
    std::cout << collect_text(*report);
  }
  std::cout.flush();
  return 0;
}

struct PinArgs {
  std::string path;
  bool escaped = false;
  std::optional<std::uint64_t> version;
  bool remove = false;
};

int run_pin(const Config& config, const PinArgs& args) {
  constexpr std::string_view kCmd = "pin";
  auto [path, store] = path_and_store(kCmd, config, args.path, args.escaped);
  if (!store) return 2;
  std::uint64_t number = 0;
  if (args.version) {
    number = *args.version;
  } else {
    auto history = store->versions(path);
    if (!history) return fail(kCmd, history.error(), 1);
    if (history->empty())
      return fail(kCmd, fmt::format("{} was never archived", shown_path(path)), 1);
    number = history->back().number;
  }
  if (auto done = store->pin(path, number, !args.remove); !done) return fail(kCmd, done.error(), 1);
  std::cout << fmt::format("{} version {} of {}\n", args.remove ? "unpinned" : "pinned", number,
                           shown_path(path));
  return 0;
}

struct PurgeArgs {
  std::string path;
  bool escaped = false;
  bool dry_run = false;
  bool json = false;
  bool no_gc = false;
};

int run_purge(const Config& config, const PurgeArgs& args) {
  constexpr std::string_view kCmd = "purge";
  auto [path, store] = path_and_store(kCmd, config, args.path, args.escaped);
  if (!store) return 2;
  auto report = store->purge(path, args.dry_run);
  if (!report) return fail(kCmd, report.error(), 1);
  auto gc = collect_after(*store, args.dry_run || args.no_gc);
  if (!gc) return fail(kCmd, gc.error(), 1);
  const std::optional<ar::CollectReport>& collected = *gc;
  struct stat st {};
  const bool still_there = ::lstat(path.c_str(), &st) == 0;
  if (args.json) {
    nlohmann::json out = {{"path", escape_bytes(path)},
                          {"dry_run", args.dry_run},
                          {"paths", report->paths},
                          {"versions", report->versions},
                          {"content_bytes", report->content_bytes},
                          {"blobs", report->blobs},
                          {"packs", report->packs},
                          {"still_on_disk", still_there}};
    if (collected) out["collection"] = cli::collection_json(*collected);
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "{} {} versions of {} paths at or beneath {} ({} bytes of file content; {} blobs in {} "
        "packs)\n",
        args.dry_run ? "would purge" : "purged", report->versions, report->paths, shown_path(path),
        report->content_bytes, report->blobs, report->packs);
    if (collected) std::cout << collect_text(*collected);
  }
  if (still_there) {
    std::cerr << fmt::format(
        "timewarp purge: {} is still on disk: the next change to it archives it again; delete "
        "it, or exclude it from the sources, first\n",
        shown_path(path));
  }
  if (collected && collected->packs_busy > 0) {
    std::cerr << "timewarp purge: some packs are open in a running archiver: run timewarp gc "
                 "again once it has moved on, to rewrite them\n";
  }
  std::cout.flush();
  return 0;
}

void add_purge(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<PurgeArgs>();
  auto* purge = cli::add_archive_subcommand(
      app, "purge", "remove every version of PATH and of what is beneath it, then collect");
  cli::add_path_argument(*purge, args->path, args->escaped);
  purge->add_flag("-n,--dry-run", args->dry_run, "only count what would go");
  purge->add_flag("--json", args->json, "print the result as JSON");
  purge->add_flag("--no-gc", args->no_gc, "do not collect afterwards (timewarp gc does)");
  purge->footer("Example: timewarp purge /home/ann/.ssh/id_ed25519");
  cli::run_when_parsed(*purge, run, [&config, args] { return run_purge(config, *args); });
}

void add_forget(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<ForgetArgs>();
  auto* forget = cli::add_archive_subcommand(
      app, "forget",
      "remove the versions the retention policy (keep_* keys) no longer keeps, then collect");
  forget->add_flag("-n,--dry-run", args->dry_run, "only list what would go");
  forget->add_flag("--json", args->json, "print the result as JSON");
  forget->add_flag("--no-gc", args->no_gc, "do not collect afterwards (timewarp gc does)");
  forget->add_flag("--summary", args->summary, "print the totals only, not each version");
  forget->add_flag("--low-priority", args->low_priority,
                   "run at the lowest CPU and I/O priority (as the monitor's runs do)");
  forget->add_option("--now", args->now,
                     "apply the policy as of TIME instead of now (what would be gone by then)");
  forget->footer("Example: timewarp forget --dry-run --backup-root /srv/timewarp");
  cli::run_when_parsed(*forget, run, [&config, args] { return run_forget(config, *args); });
}

void add_gc(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<GcArgs>();
  auto* gc = cli::add_archive_subcommand(
      app, "gc", "free the space of what no version names (beside running archivers)");
  gc->add_flag("--json", args->json, "print the figures as JSON");
  gc->add_option("--rewrite-unused", args->rewrite_share,
                 "rewrite a pack when at least this share of it is unused (0..1, default 0.2)")
      ->check(CLI::Range(0.0, 1.0));
  cli::run_when_parsed(*gc, run, [&config, args] { return run_gc(config, *args); });
}

void add_pin(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<PinArgs>();
  auto* pin = cli::add_archive_subcommand(
      app, "pin", "keep a version of PATH whatever the retention policy says");
  cli::add_path_argument(*pin, args->path, args->escaped);
  pin->add_option("--version", args->version, "version number N (default: the latest)")
      ->transform(tw::number_in<std::uint64_t>());
  pin->add_flag("--remove", args->remove, "unpin it instead");
  cli::run_when_parsed(*pin, run, [&config, args] { return run_pin(config, *args); });
}

}  // namespace

void add_retention_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  add_forget(app, config, run);
  add_gc(app, config, run);
  add_pin(app, config, run);
  add_purge(app, config, run);
}

}  // namespace tw
