// The operator's view of the master queue: `status` (with --json and --watch), `history`,
// `failed`, `retry` and `prune`. Not thread-safe: call from main only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::cli {

// Registers the subcommands on `app`; the one chosen sets `run` to its work, which returns
// the exit code (0 success, 1 failure, 2 bad usage). `config` must outlive `run`.
void add_status_commands(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
