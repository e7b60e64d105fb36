#include "cli/subcommand.hpp"

#include <sys/stat.h>

#include <utility>

#include <fmt/format.h>

#include "common/escape.hpp"

namespace tw::cli {

CLI::App* add_archive_subcommand(CLI::App& app, const std::string& name,
                                 const std::string& description) {
  auto* command = app.add_subcommand(name, description);
  command->fallthrough();
  return command;
}

void add_path_argument(CLI::App& command, std::string& path, bool& escaped) {
  command.add_option("PATH", path, "the file or directory (absolute, or relative to here)")
      ->required();
  command.add_flag("--escaped", escaped, "PATH is given in the escaped form (%XX)");
}

void run_when_parsed(CLI::App& command, std::function<int()>& run, std::function<int()> work) {
  command.callback([&run, work = std::move(work)] { run = work; });
}

std::string_view file_type_name(std::uint32_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISLNK(mode)) return "symlink";
  return "other";
}

Result<std::string> path_argument_bytes(const std::string& arg, bool escaped) {
  std::string raw = arg;
  if (escaped) {
    auto unescaped = unescape_bytes(arg);
    if (!unescaped) return Error{fmt::format("'{}' is not a well-formed escaped path", arg)};
    raw = std::move(*unescaped);
  }
  if (raw.empty()) return Error{"empty path"};
  return raw;
}

}  // namespace tw::cli
