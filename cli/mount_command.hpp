// `timewarp mount MOUNTPOINT`: the archive under backup_root as a read-only filesystem
// (libfuse 3, low-level API), in the foreground until unmounted (fusermount3 -u, umount) or
// stopped by SIGTERM, SIGINT or SIGHUP (docs/operations.md, "Mounting the archive"). What it
// shows is mount_tree.hpp's. Not thread-safe: call from main only.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::cli {

// Registers `mount` on `app`; when parsed, `run` becomes the mount, returning the exit code
// (0 once unmounted or stopped, 1 when it could not mount or serve, 2 bad usage).
void add_mount_command(CLI::App& app, Config& config, std::function<int()>& run);

}  // namespace tw::cli
