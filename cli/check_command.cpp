#include "cli/check_command.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "archive/paths.hpp"
#include "archive/store.hpp"
#include "cli/archive_commands.hpp"
#include "cli/check_walk.hpp"
#include "cli/subcommand.hpp"
#include "common/escape.hpp"
#include "common/filters.hpp"
#include "common/paths.hpp"

namespace tw::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCmd = "check";

struct CheckArgs {
  std::vector<std::string> paths;
  bool escaped = false;
  bool content = false;
  bool json = false;
  bool from_store = false;
};

int fail(std::string_view message, int code) {
  std::cerr << "timewarp " << kCmd << ": " << shown_text(message) << "\n";
  return code;
}

// `path` (absolute) made lexically normal with every symbolic link in the part of it that
// exists resolved; the rest kept as given. The monitor resolves a source directory so, once
// at start, and the archive therefore keys no path with a link among its components.
std::string resolve(const std::string& path) {
  std::error_code error;
  const fs::path resolved = fs::weakly_canonical(absolute_path(path), error);
  return absolute_path(error ? fs::path(path) : resolved).native();
}

// What to check and how to filter it.
struct Plan {
  std::vector<std::string> paths;  // absolute, canonical, none inside another
  Filter filter;
};

// A PATH argument made absolute and resolved: a PATH inside a source names an entry of it,
// so only its directory is resolved (a link there is checked as the link it is); any
// other PATH is resolved whole, as a source directory is.
Result<std::string> resolve_path(const std::string& argument, bool escaped,
                                 const std::vector<std::string>& sources) {
  auto raw = path_argument_bytes(argument, escaped);
  if (!raw) return raw;
  auto normal = archive::normalize_path(absolute_path(*raw).native());
  if (!normal) return Error{normal.error()};
  const bool entry = std::any_of(sources.begin(), sources.end(), [&](const std::string& root) {
    return *normal != root && path_within(*normal, root);
  });
  if (!entry || *normal == "/") return resolve(*normal);
  return join_path(resolve(parent_path(*normal)), base_name(*normal));
}

Result<Plan> make_plan(const Config& config, const CheckArgs& args) {
  if (args.paths.empty() && config.source_dirs.empty()) {
    return Error{
        "no PATH given and no source_dirs configured (PATHs go before options that take "
        "several values, such as --source and --exclude, or after --)"};
  }
  std::vector<std::string> given;     // the sources as configured, made absolute
  std::vector<std::string> resolved;  // and resolved
  for (const auto& dir : config.source_dirs) {
    given.push_back(absolute_path(dir).native());
    resolved.push_back(resolve(given.back()));
  }
  Plan plan;
  if (args.paths.empty()) {
    plan.paths = resolved;
  } else {
    std::vector<std::string> spellings = given;
    spellings.insert(spellings.end(), resolved.begin(), resolved.end());
    for (const auto& argument : args.paths) {
      auto path = resolve_path(argument, args.escaped, spellings);
      if (!path) return Error{path.error()};
      plan.paths.push_back(std::move(*path));
    }
  }
  // The filters see the sources under both spellings (a glob written with the configured
  // one applies to the resolved one), and a PATH in none of them as a root of its own (for
  // the relative globs).
  Config filter_config = config;
  filter_config.source_dirs = given;
  filter_config.source_dirs.insert(filter_config.source_dirs.end(), resolved.begin(),
                                   resolved.end());
  for (const auto& path : plan.paths) {
    if (std::none_of(resolved.begin(), resolved.end(),
                     [&](const std::string& root) { return path_within(path, root); })) {
      filter_config.source_dirs.push_back(path);
    }
  }
  if (!config.backup_root.empty()) {
    filter_config.backup_root = resolve(absolute_path(config.backup_root).native());
  }
  try {
    plan.filter = Filter::from_config(filter_config);
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
  // Each tree once: drop a PATH inside another.
  std::sort(plan.paths.begin(), plan.paths.end());
  std::vector<std::string> distinct;
  for (auto& path : plan.paths) {
    if (distinct.empty() || !path_within(path, distinct.back())) distinct.push_back(path);
  }
  plan.paths = std::move(distinct);
  return plan;
}

// For a person: names shown with their display controls escaped too (--json keeps the
// exact escaped form).
std::string text_line(const Difference& d) {
  return fmt::format("{}\t{}\t{}\t{}\n", to_string(d.kind), shown_path(d.path),
                     shown_text(d.archive), shown_text(d.disk));
}

nlohmann::ordered_json json_line(const Difference& d) {
  return {{"kind", to_string(d.kind)},
          {"path", escape_bytes(d.path)},
          {"archive", d.archive},
          {"disk", d.disk}};
}

std::string summary(const TreeCheck& check, std::size_t trees) {
  std::string line = fmt::format("compared {} paths in {} {}: ", check.compared(), trees,
                                 trees == 1 ? "tree" : "trees");
  if (check.total() == 0) return line + "the archive is current";
  line += fmt::format("{} differences (", check.total());
  bool first = true;
  for (std::size_t k = 0; k < kDiffKinds; ++k) {
    const auto kind = static_cast<DiffKind>(k);
    if (check.count(kind) == 0) continue;
    line += fmt::format("{}{} {}", first ? "" : ", ", check.count(kind), to_string(kind));
    first = false;
  }
  return line + ")";
}

// The --json document: what was compared, the counts per kind, then the differences.
nlohmann::ordered_json json_document(const TreeCheck& check, const Plan& plan, bool content,
                                     nlohmann::ordered_json differences) {
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (std::size_t k = 0; k < kDiffKinds; ++k) {
    const auto kind = static_cast<DiffKind>(k);
    counts[std::string(to_string(kind))] = check.count(kind);
  }
  nlohmann::ordered_json paths = nlohmann::ordered_json::array();
  for (const auto& path : plan.paths) paths.push_back(escape_bytes(path));
  return {{"paths", std::move(paths)},
          {"content", content},
          {"compared", check.compared()},
          {"current", check.total() == 0},
          {"total", check.total()},
          {"counts", std::move(counts)},
          {"differences", std::move(differences)}};
}

// Nothing on disk and nothing archived at or beneath `path`: most likely a mistyped PATH.
bool unknown_anywhere(const archive::Store& store, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return false;
  auto history = store.versions(path);
  if (!history || !history->empty()) return false;
  auto children = store.children(path);
  return children && children->empty();
}

int run_check(const Config& config, const CheckArgs& args) {
  auto plan = make_plan(config, args);
  if (!plan) return fail(plan.error(), 2);
  auto store = open_store(config, args.from_store);
  if (!store) return fail(store.error(), 2);
  for (const auto& path : plan->paths) {
    if (unknown_anywhere(*store, path)) {
      return fail(fmt::format("{}: not on disk and not in the archive", shown_path(path)), 2);
    }
  }

  nlohmann::ordered_json differences = nlohmann::ordered_json::array();
  TreeCheck check(*store, plan->filter, CheckOptions{args.content}, [&](const Difference& d) {
    if (args.json) {
      differences.push_back(json_line(d));
    } else {
      std::cout << text_line(d);
    }
  });
  for (const auto& path : plan->paths) {
    if (plan->filter.excluded(path)) {
      std::cerr << fmt::format("timewarp check: {} is excluded by the filters; not compared\n",
                               shown_path(path));
      continue;
    }
    check.check(path);
  }

  if (args.json) {
    std::cout << json_document(check, *plan, args.content, std::move(differences))
                     .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
              << "\n";
  }
  std::cout.flush();
  std::cerr << "timewarp check: " << summary(check, plan->paths.size()) << "\n";
  return check.total() == 0 ? 0 : 1;
}

}  // namespace

void add_check_command(CLI::App& app, Config& config, std::function<int()>& run) {
  auto args = std::make_shared<CheckArgs>();
  auto* check = add_archive_subcommand(
      app, "check",
      "compare the archive's latest state with the sources on disk; list every difference");
  check->add_option("PATH", args->paths,
                    "files or directories to compare (default: the source_dirs; absolute, or "
                    "relative to here)");
  check->add_flag("--escaped", args->escaped, "PATHs are given in the escaped form (%XX)");
  check->add_flag("--content", args->content,
                  "also re-read every file and compare its SHA-256 with the archived one");
  check->add_flag("--json", args->json, "print one JSON document instead of lines");
  add_from_store_flag(*check, args->from_store);
  run_when_parsed(*check, run, [&config, args] { return run_check(config, *args); });
}

}  // namespace tw::cli
