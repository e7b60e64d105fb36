// The operator tool's retention subcommand: `forget --dry-run`, what the retention policy
// (the keep_* keys; archive/retention.hpp) would remove from the archive now, listed for a
// person or as JSON. Works from the backup root alone. Not thread-safe: call from main only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw {

// Registers the subcommand on `app`; as add_archive_commands (archive_commands.hpp) does,
// its callback sets `run` to the work, which returns the exit code (0 done, 1 the archive
// could not be read, 2 bad usage). `config` must outlive `run`.
void add_retention_commands(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw
