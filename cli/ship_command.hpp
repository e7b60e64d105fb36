// `timewarp ship`: the archive's sealed packs copied to the pack store the configuration
// names (the store_* keys; ARCHITECTURE.md, "Object store"), and the packs collection
// dropped removed from it. Works from the backup root and the store alone (no database);
// the monitor runs it in the background. Not thread-safe: call from main only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::cli {

// Registers `ship` on `app`; as add_archive_commands (archive_commands.hpp) does, its
// callback sets `run` to the work, which returns the exit code (0 done, 1 the store or the
// archive failed part way, 2 bad usage or configuration). `config` must outlive `run`.
void add_ship_command(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
