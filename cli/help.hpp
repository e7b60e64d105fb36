// How `timewarp` presents itself: --help that leads with the subcommands (one line each) and
// leaves the configuration keys to `timewarp help config`, an example at the foot of each
// subcommand's help, and `timewarp config`, which says which file was read and where each
// key's value came from. Not thread-safe: call from main only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::cli {

// Adds `help [TOPIC]` and `config [--json]`; call once every other subcommand is added.
void add_help_commands(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
