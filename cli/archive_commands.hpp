// The operator tool's archive subcommands: `versions`, `restore` and `verify`. They work
// from the backup root alone (no database). Not thread-safe: call from main only.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "archive/store.hpp"
#include "common/config.hpp"
#include "common/result.hpp"

namespace tw {

// Registers the subcommands on `app`. When one of them is parsed its callback sets `run`
// to the work to do; `run()` returns the exit code (0 success, 1 failure or damage found,
// 2 bad usage). `config` must outlive `run`.
void add_archive_commands(CLI::App& app, Config& config, std::function<int()>& run);

// Prints "timewarp COMMAND: MESSAGE" (display controls escaped) to stderr; returns `code`.
int command_failed(std::string_view command, std::string_view message, int code);

// The canonical absolute form of a PATH argument: raw bytes (relative to the working
// directory when not absolute), or with `escaped` the escaped form (%XX) `versions` prints.
Result<std::string> command_line_path(const std::string& arg, bool escaped);

// The configuration's archive opened read only, as every archive subcommand reads it; a
// missing backup_root is named with where to set it. With `from_store`, the archive shipped
// to the pack store instead (shipped_archive.hpp).
archive::Expected<archive::Store> open_store(const Config& config, bool from_store = false);

// The `--from-store` flag of the subcommands that read an archive.
void add_from_store_flag(CLI::App& command, bool& from_store);

// The configuration's archive, opened to be changed: it must exist (a read-only open says
// what is wrong), and a format-1 archive is refused by the writable open, which says why.
archive::Expected<archive::Store> open_changing(const Config& config);

}  // namespace tw
