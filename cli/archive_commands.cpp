#include "cli/archive_commands.hpp"

#include <unistd.h>

#include <climits>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "archive/paths.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "cli/subcommand.hpp"
#include "common/escape.hpp"

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

std::string version_line(const ar::Version& v, const std::string& path) {
  std::string line =
      fmt::format("{}\t{}\t{}\t{}\t{}\t{}", v.number, ar::format_time_ns(v.archived_at_ns),
                  to_string(v.op), v.size, v.sha256.empty() ? "-" : v.sha256, shown_path(path));
  if (!v.link_target.empty()) line += "\tlink=" + shown_path(v.link_target);
  if (!v.moved_from.empty()) line += "\tfrom=" + shown_path(v.moved_from);
  if (!v.moved_to.empty()) line += "\tto=" + shown_path(v.moved_to);
  if (v.is_directory()) line += "\tdirectory";
  return line;
}

int run_versions(const Config& config, const ArchiveArgs& args) {
  constexpr std::string_view kCmd = "versions";
  auto path = source_path(args);
  if (!path) return fail(kCmd, path.error(), 2);
  auto store = open_store(config);
  if (!store) return fail(kCmd, store.error(), 2);
  std::vector<std::string> paths{*path};
  if (args.recursive) {
    auto within = store->paths_within(*path);
    if (!within) return fail(kCmd, within.error());
    paths = std::move(*within);
  }
  std::size_t printed = 0;
  for (const auto& p : paths) {
    auto versions = store->versions(p);
    if (!versions) return fail(kCmd, versions.error());
    for (const auto& v : *versions) {
      std::cout << version_line(v, p) << "\n";
      ++printed;
    }
  }
  std::cout.flush();
  if (printed == 0) {
    auto within = store->paths_within(*path);
    if (within && within->size() > 1 && !args.recursive) {
      return fail(kCmd,
                  fmt::format("{} has no versions of its own; {} paths beneath it are archived "
                              "(use --recursive)",
                              shown_path(*path), within->size() - 1));
    }
    return fail(kCmd, fmt::format("{} is not in the archive", shown_path(*path)));
  }
  return 0;
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
  auto store = open_store(config);
  if (!store) return fail(kCmd, store.error(), 2);
  auto report = store->restore(*path, options);
  if (!report) return fail(kCmd, report.error());
  for (const auto& problem : report->problems) {
    std::cerr << "timewarp restore: " << shown_text(problem) << "\n";
  }
  std::cout << fmt::format("restored {} files, {} symlinks, {} directories ({} bytes) to {}",
                           report->files, report->symlinks, report->directories, report->bytes,
                           shown_path(report->destination));
  if (report->skipped > 0) std::cout << fmt::format("; skipped {} deleted paths", report->skipped);
  std::cout << "\n";
  std::cout.flush();
  if (!report->problems.empty()) {
    return fail(kCmd, fmt::format("{} entries could not be restored", report->problems.size()));
  }
  return 0;
}

int run_verify(const Config& config) {
  constexpr std::string_view kCmd = "verify";
  auto store = open_store(config);
  if (!store) return fail(kCmd, store.error(), 2);
  const auto report =
      store->verify([](std::string_view line) { spdlog::info("verify: {}", line); });
  for (const auto& problem : report.problems) std::cout << shown_text(problem) << "\n";
  // Versions retention removed are not damage: said apart, when there are any.
  std::string removed =
      report.forgotten == 0 ? "" : fmt::format(" ({} removed by retention)", report.forgotten);
  if (report.reclaimable_packs > 0) {
    removed += fmt::format("; {} empty packs (timewarp gc removes them)", report.reclaimable_packs);
  }
  std::cout << fmt::format(
      "verified {} objects ({} unreferenced), {} histories, {} versions{}: {}\n", report.objects,
      report.unreferenced_objects, report.histories, report.versions, removed,
      report.ok() ? "OK" : fmt::format("{} problems", report.problems.size()));
  std::cout.flush();
  return report.ok() ? 0 : 1;
}

}  // namespace

archive::Expected<archive::Store> open_store(const Config& config) {
  if (config.backup_root.empty()) {
    return archive::permanent(
        "backup_root is not set (use --backup-root, BACKUP_ROOT or the config file)");
  }
  return archive::Store::open(config.backup_root, archive::Store::Mode::ReadOnly);
}

void add_archive_commands(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<ArchiveArgs>();

  auto* versions =
      cli::add_archive_subcommand(app, "versions", "list the archived versions of PATH");
  cli::add_path_argument(*versions, args->path, args->escaped);
  versions->add_flag("-r,--recursive", args->recursive, "also every archived path beneath PATH");
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
  restore->callback([&config, &run, args, version] {
    const bool version_given = version->count() > 0;
    run = [&config, args, version_given] { return run_restore(config, *args, version_given); };
  });

  auto* verify = cli::add_archive_subcommand(
      app, "verify", "re-read every archived object and history; name what is damaged");
  cli::run_when_parsed(*verify, run, [&config] { return run_verify(config); });
}

}  // namespace tw
