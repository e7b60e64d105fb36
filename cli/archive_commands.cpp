#include "cli/archive_commands.hpp"
#include "cli/shipped_archive.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "archive/paths.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "cli/archive_status.hpp"
#include "cli/subcommand.hpp"
#include "common/escape.hpp"
#include "common/human.hpp"
#include "common/mutex.hpp"

namespace tw {
namespace {

namespace ar = tw::archive;

struct ArchiveArgs {
  std::string path;
  bool escaped = false;
  bool recursive = false;
  std::string at;
  std::uint64_t version = 0;
  std::string to;
  bool force = false;
  bool json = false;
  bool from_store = false;
};

int fail(std::string_view command, std::string_view message, int code = 1) {
  return command_failed(command, message, code);
}

Result<std::string> source_path(const ArchiveArgs& args) {
  return command_line_path(args.path, args.escaped);
}

}  // namespace

int command_failed(std::string_view command, std::string_view message, int code) {
  // Messages name paths with shown_path already; shown_text also covers what came from
  // elsewhere (an argument as typed).
  std::cerr << "timewarp " << command << ": " << shown_text(message) << "\n";
  return code;
}

Result<std::string> command_line_path(const std::string& arg, bool escaped) {
  auto bytes = cli::path_argument_bytes(arg, escaped);
  if (!bytes) return bytes;
  std::string raw = std::move(*bytes);
  if (raw.front() != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return Error{"cannot find the current directory"};
    raw = std::string(cwd) + "/" + raw;
  }
  auto normal = ar::normalize_path(raw);
  if (!normal) return Error{normal.error()};
  return std::move(*normal);
}

namespace {

using Json = nlohmann::ordered_json;

// JSON text that never throws on invalid UTF-8 (it is replaced; paths are escaped already).
std::string dump(const Json& document) {
  return document.dump(2, ' ', false, Json::error_handler_t::replace);
}

// One archived path and its versions, oldest first, with the numbers of those pinned.
struct PathVersions {
  std::string path;
  std::vector<ar::Version> versions;
  std::set<std::uint64_t> pinned;
};

// The versions of each of `paths` that has any.
ar::Expected<std::vector<PathVersions>> read_versions(const ar::Store& store,
                                                      const std::vector<std::string>& paths) {
  std::vector<PathVersions> out;
  for (const auto& p : paths) {
    auto versions = store.versions(p);
    if (!versions) return versions.fault();
    if (versions->empty()) continue;  // a parent known only by name
    auto pinned = store.pins(p);
    if (!pinned) return pinned.fault();
    out.push_back({p, std::move(*versions), std::move(*pinned)});
  }
  return out;
}

// "file", "symlink", "directory" or "other"; empty for a tombstone (nothing there).
std::string type_name(const ar::Version& v) {
  return v.exists() ? std::string(cli::file_type_name(v.mode)) : std::string();
}

// The path column of a row: the path, then what the other columns do not say.
std::string path_cell(const std::string& path, const ar::Version& v, bool pinned) {
  std::string cell = shown_path(path);
  if (!v.link_target.empty()) cell += " -> " + shown_path(v.link_target);
  if (!v.moved_from.empty()) cell += " (moved from " + shown_path(v.moved_from) + ")";
  if (!v.moved_to.empty()) cell += " (moved to " + shown_path(v.moved_to) + ")";
  if (pinned) cell += " (pinned)";
  return cell;
}

// For people: a header, then one aligned row per version, times local to the second, digests
// cut to 12 hex digits, sizes in binary units.
std::string versions_text(const std::vector<PathVersions>& listed) {
  std::vector<std::optional<std::int64_t>> instants;
  for (const auto& one : listed) {
    for (const auto& v : one.versions) instants.emplace_back(v.archived_at_ns);
  }
  const LocalTimes times = local_times(instants);
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"VERSION", zone_header("ARCHIVED", times), "OP", "TYPE", "SIZE", "SHA256", "PATH"});
  std::size_t i = 0;
  for (const auto& one : listed) {
    for (const auto& v : one.versions) {
      const std::string type = type_name(v);
      rows.push_back({std::to_string(v.number), times.texts[i++], std::string(to_string(v.op)),
                      type.empty() ? "-" : type, v.is_file() ? cli::bytes_text(v.size) : "-",
                      v.sha256.empty() ? "-" : v.sha256.substr(0, 12),
                      path_cell(one.path, v, one.pinned.contains(v.number))});
    }
  }
  return table_text(rows, {true, false, false, false, true, false});
}

// A version for scripts, at full precision; paths in the exact escaped form (null: none).
Json version_json(const ar::Version& v, bool pinned) {
  const auto path_or_null = [](const std::string& p) {
    return p.empty() ? Json(nullptr) : Json(escape_bytes(p));
  };
  // A tombstone records that nothing was there: it has no type, mode, owner or mtime.
  const bool exists = v.exists();
  const auto when = [exists](auto value) { return exists ? Json(value) : Json(nullptr); };
  return Json{{"number", v.number},
              {"archived_at", ar::format_time_ns(v.archived_at_ns)},
              {"archived_at_ns", v.archived_at_ns},
              {"op", std::string(to_string(v.op))},
              {"type", when(type_name(v))},
              {"size", v.size},
              {"sha256", v.sha256.empty() ? Json(nullptr) : Json(v.sha256)},
              {"mode", when(fmt::format("{:04o}", v.mode & 07777))},
              {"uid", when(v.uid)},
              {"gid", when(v.gid)},
              {"mtime", when(ar::format_time_ns(v.mtime_ns))},
              {"mtime_ns", when(v.mtime_ns)},
              {"link_target", path_or_null(v.link_target)},
              {"moved_from", path_or_null(v.moved_from)},
              {"moved_to", path_or_null(v.moved_to)},
              {"pinned", pinned}};
}

Json versions_json(const std::string& path, bool recursive,
                   const std::vector<PathVersions>& listed) {
  Json paths = Json::array();
  for (const auto& one : listed) {
    Json versions = Json::array();
    for (const auto& v : one.versions) {
      versions.push_back(version_json(v, one.pinned.contains(v.number)));
    }
    paths.push_back({{"path", escape_bytes(one.path)}, {"versions", std::move(versions)}});
  }
  return {{"path", escape_bytes(path)}, {"recursive", recursive}, {"paths", std::move(paths)}};
}

int run_versions(const Config& config, const ArchiveArgs& args) {
  constexpr std::string_view kCmd = "versions";
  auto path = source_path(args);
  if (!path) return fail(kCmd, path.error(), 2);
  auto store = open_store(config, args.from_store);
  if (!store) return fail(kCmd, store.error(), 2);
  std::vector<std::string> paths{*path};
  if (args.recursive) {
    auto within = store->paths_within(*path);
    if (!within) return fail(kCmd, within.error());
    paths = std::move(*within);
  }
  auto listed = read_versions(*store, paths);
  if (!listed) return fail(kCmd, listed.error());
  if (listed->empty()) {
    auto within = store->paths_within(*path);
    if (within && within->size() > 1 && !args.recursive) {
      return fail(kCmd,
                  fmt::format("{} has no versions of its own; {} paths beneath it are archived "
                              "(use --recursive)",
                              shown_path(*path), within->size() - 1));
    }
    return fail(kCmd, fmt::format("{} is not in the archive", shown_path(*path)));
  }
  if (args.json) {
    std::cout << dump(versions_json(*path, args.recursive, *listed)) << "\n";
  } else {
    std::cout << versions_text(*listed);
  }
  std::cout.flush();
  return 0;
}

// "12.5 MiB/s" over `seconds` (none yet: "-").
std::string rate_text(std::uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  return cli::bytes_text(static_cast<std::uint64_t>(static_cast<double>(bytes) / seconds)) + "/s";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What a restore has placed so far, counted by its workers (RestoreOptions::on_placed) and
// read by the progress line's thread.
struct RestoreProgress {
  std::atomic<std::uint64_t> entries{0};
  std::atomic<std::uint64_t> bytes{0};
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  void add(const ar::Version& v) {
    entries.fetch_add(1, std::memory_order_relaxed);
    if (v.is_file()) bytes.fetch_add(v.size, std::memory_order_relaxed);
  }
  std::string text() const {
    const double seconds = seconds_since(started);
    const std::uint64_t done = bytes.load(std::memory_order_relaxed);
    return fmt::format("restoring: {} entries, {} ({}), {:.0f} s",
                       entries.load(std::memory_order_relaxed), cli::bytes_text(done),
                       rate_text(done, seconds), seconds);
  }
};

// The restore's summary: counts, readable size, and how long it took.
std::string restore_summary(const ar::RestoreReport& report, double seconds) {
  std::string line =
      fmt::format("restored {} files, {} symlinks, {} directories ({}) to {} in {:.1f} s",
                  report.files, report.symlinks, report.directories, cli::bytes_text(report.bytes),
                  shown_path(report.destination), seconds);
  if (report.skipped > 0) line += fmt::format("; skipped {} deleted paths", report.skipped);
  return line + "\n";
}

int run_restore(const Config& config, const ArchiveArgs& args, bool version_given) {
  constexpr std::string_view kCmd = "restore";
  auto path = source_path(args);
  if (!path) return fail(kCmd, path.error(), 2);
  ar::RestoreOptions options;
  if (!args.at.empty()) {
    auto at = ar::parse_time_ns(args.at);
    if (!at) return fail(kCmd, at.error(), 2);
    options.which.at_ns = *at;
  }
  if (version_given) options.which.number = args.version;
  options.destination = args.to;
  options.overwrite = args.force;
  options.restore_owner = ::geteuid() == 0;
  auto store = open_store(config, args.from_store);
  if (!store) return fail(kCmd, store.error(), 2);
  RestoreProgress progress;
  options.on_placed = [&progress](const ar::Version& v) { progress.add(v); };
  ProgressLine line([&progress] { return progress.text(); });
  auto report = store->restore(*path, options);
  line.stop();
  if (!report) return fail(kCmd, report.error());
  for (const auto& problem : report->problems) {
    std::cerr << "timewarp restore: " << shown_text(problem) << "\n";
  }
  std::cout << restore_summary(*report, seconds_since(progress.started));
  std::cout.flush();
  if (!report->problems.empty()) {
    return fail(kCmd, fmt::format("{} entries could not be restored", report->problems.size()));
  }
  return 0;
}

// The verify report for scripts: the figures, the problems (damage) and the warnings.
Json verify_json(const ar::VerifyReport& report) {
  return {{"ok", report.ok()},
          {"objects", report.objects},
          {"unreferenced_objects", report.unreferenced_objects},
          {"histories", report.histories},
          {"versions", report.versions},
          {"removed_by_retention", report.forgotten},
          {"reclaimable_packs", report.reclaimable_packs},
          {"problems", report.problems},
          {"warnings", report.warnings}};
}

std::string verify_text(const ar::VerifyReport& report) {
  std::string out;
  for (const auto& problem : report.problems) out += shown_text(problem) + "\n";
  // Versions retention removed are not damage: said apart, when there are any.
  std::string removed =
      report.forgotten == 0 ? "" : fmt::format(" ({} removed by retention)", report.forgotten);
  if (report.reclaimable_packs > 0) {
    removed += fmt::format("; {} empty packs (timewarp gc removes them)", report.reclaimable_packs);
  }
  return out +
         fmt::format("verified {} objects ({} unreferenced), {} histories, {} versions{}: {}\n",
                     report.objects, report.unreferenced_objects, report.histories, report.versions,
                     removed,
                     report.ok() ? "OK" : fmt::format("{} problems", report.problems.size()));
}

int run_verify(const Config& config, const ArchiveArgs& args) {
  constexpr std::string_view kCmd = "verify";
  auto store = open_store(config, args.from_store);
  if (!store) return fail(kCmd, store.error(), 2);
  // The last step verify reported, for the progress line's thread.
  Mutex mutex;
  std::string step = "reading the histories";
  const auto started = std::chrono::steady_clock::now();
  ProgressLine line([&] {
    MutexLock lock(&mutex);
    return fmt::format("verifying: {}, {:.0f} s", step, seconds_since(started));
  });
  const auto report = store->verify([&](std::string_view text) {
    spdlog::info("verify: {}", text);
    MutexLock lock(&mutex);
    step = text;
  });
  line.stop();
  std::cout << (args.json ? dump(verify_json(report)) + "\n" : verify_text(report));
  std::cout.flush();
  return report.ok() ? 0 : 1;
}

}  // namespace

archive::Expected<archive::Store> open_store(const Config& config, bool from_store) {
  if (from_store) return open_shipped(config);
  if (config.backup_root.empty()) {
    return archive::permanent(
        "backup_root is not set (use --backup-root, BACKUP_ROOT or the config file)");
  }
  return archive::Store::open(config.backup_root, archive::Store::Mode::ReadOnly,
                              given_back_hooks(config));
}

archive::Expected<archive::Store> open_changing(const Config& config) {
  TRY(open_store(config));
  return archive::Store::open(config.backup_root, archive::Store::Mode::ReadWrite,
                              given_back_hooks(config));
}

void add_from_store_flag(CLI::App& command, bool& from_store) {
  command.add_flag("--from-store", from_store,
                   "read the archive shipped to the pack store (store_* keys; store_prefix "
                   "names the host), not the backup root");
}

void add_archive_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<ArchiveArgs>();

  auto* versions =
      cli::add_archive_subcommand(app, "versions", "list the archived versions of PATH");
  cli::add_path_argument(*versions, args->path, args->escaped);
  versions->add_flag("-r,--recursive", args->recursive, "also every archived path beneath PATH");
  versions->add_flag("--json", args->json,
                     "one JSON document, at full precision (the form for scripts)");
  add_from_store_flag(*versions, args->from_store);
  cli::run_when_parsed(*versions, run, [&config, args] { return run_versions(config, *args); });

  auto* restore = cli::add_archive_subcommand(
      app, "restore",
      "restore PATH (a file, link or whole directory) as it was at a time or version");
  cli::add_path_argument(*restore, args->path, args->escaped);
  auto* at = restore->add_option(
      "--at", args->at,
      "the latest version at or before TIME: ISO-8601 (2026-11-22T10:00:00, local; ...Z, UTC) "
      "or Unix seconds");
  auto* version = restore->add_option("--version", args->version, "version number N of PATH")
                      ->transform(tw::number_in<std::uint64_t>());
  at->excludes(version);
  restore->add_option("--to", args->to, "where to put it (default: the original path)");
  restore->add_flag("-f,--force", args->force, "overwrite existing files");
  add_from_store_flag(*restore, args->from_store);
  restore->callback([&config, &run, args, version] {
    const bool version_given = version->count() > 0;
    run = [&config, args, version_given] { return run_restore(config, *args, version_given); };
  });

  auto* verify = cli::add_archive_subcommand(
      app, "verify", "re-read every archived object and history; name what is damaged");
  verify->add_flag("--json", args->json, "the report as one JSON document");
  add_from_store_flag(*verify, args->from_store);
  cli::run_when_parsed(*verify, run, [&config, args] { return run_verify(config, *args); });
}

}  // namespace tw
