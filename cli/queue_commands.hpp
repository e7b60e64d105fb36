// The operator tool's database commands: migrate and enqueue here; status, history,
// failed, retry and prune through cli/status_commands.hpp. Not thread-safe: call from main.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::cli {

// Registers the subcommands on `app`; the one chosen sets `run` to its work.
void add_queue_commands(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
