// What the archive subcommands of `timewarp` (archive_commands, check_command,
// retention_commands) share in setting themselves up on CLI11 and in reading a PATH
// argument. Not thread-safe: call from main only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "common/result.hpp"

namespace tw::cli {

// A subcommand of `app` that also takes the tool's own options (--backup-root and the other
// configuration keys) after its name.
CLI::App* add_archive_subcommand(CLI::App& app, const std::string& name,
                                 const std::string& description);

// The one PATH argument (required) and --escaped, which says how it is written.
void add_path_argument(CLI::App& command, std::string& path, bool& escaped);

// When `command` is parsed, `run` becomes `work`: main runs it once the whole command line
// is read, and its result is the exit code.
void run_when_parsed(CLI::App& command, std::function<int()>& run, std::function<int()> work);

// The kind of file a mode names, as every archive subcommand prints it: "file", "directory",
// "symlink" or "other".
std::string_view file_type_name(std::uint32_t mode);

// The raw bytes a PATH argument names: as given, or with `escaped` its escaped form (%XX)
// decoded. A malformed escape and an empty path are refused.
Result<std::string> path_argument_bytes(const std::string& arg, bool escaped);

}  // namespace tw::cli
