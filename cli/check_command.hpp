// The operator tool's `check` subcommand: proves the archive is current by comparing its
// latest state with the live source trees (names, types, sizes, mtimes, modes, owners,
// link targets, and with --content the bytes). `verify` proves the archive intact; `check`
// proves it up to date. Works from the backup root and the sources alone (no database).
// Not thread-safe: call from main only.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "common/config.hpp"

namespace tw::cli {

// Registers `check` on `app`. When it is parsed its callback sets `run` to the work;
// `run()` returns the exit code: 0 the archive matches the sources, 1 differences (or
// entries that could not be read), 2 bad usage or an archive that cannot be opened.
// `config` must outlive `run`.
void add_check_command(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
