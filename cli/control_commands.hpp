// The operator tool's commands for running monitors: `timewarp archivers [N]` shows the
// archiver pool of every running scheduler, or asks every running monitor to resize it to
// N (through timewarp.control and NOTIFY timewarp_control, so it works across hosts) and
// waits until the schedulers report it.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::cli {

// Registers the subcommands on `app`; the one chosen sets `run` to its work.
void add_control_commands(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
