// The operator tool's retention subcommands: `forget` (the retention policy, the keep_*
// keys of archive/retention.hpp, applied now, then a collection; with --dry-run only listed),
// `gc` (a collection: the space of what no version names freed, beside running archivers),
// `pin` (a version kept whatever the policy says) and `purge` (every version of a path and
// of what is beneath it removed, the packs that held them rewritten). For a person or as JSON. They work
// from the backup root alone. Not thread-safe: call from main only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw {

// Registers the subcommands on `app`; as add_archive_commands (archive_commands.hpp) does,
// its callback sets `run` to the work, which returns the exit code (0 done, 1 the archive
// could not be read, 2 bad usage). `config` must outlive `run`.
void add_retention_commands(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw
