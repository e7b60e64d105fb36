// The operator tool's `diff` subcommand: what changed in the archive between two instants
// (added, removed, content, metadata, type, renamed), each instant's tree read as
// `restore --at` reads it (Store::tree_at). Works from the backup root alone (no database).
// Not thread-safe: call from main only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::cli {

// Registers `diff` on `app`. When it is parsed its callback sets `run` to the work; `run()`
// returns the exit code: 0 with or without changes, 1 when the archive could not be read
// whole (a moment retention thinned, a part of a tree left out), 2 bad usage or an archive
// that cannot be opened. `config` must outlive `run`.
void add_diff_command(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
