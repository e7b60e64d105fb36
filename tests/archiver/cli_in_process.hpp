// Runs `timewarp` subcommands in-process against a test archive, their output captured: the
// one runner of the archive subcommands' tests (archive_commands_fixture.hpp,
// check_command_test).
#pragma once

#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::test {

// What registers the subcommands under test on the app (add_archive_commands, ...).
using AddCommands = std::function<void(CLI::App&, Config&, std::function<int()>&)>;

// Runs `timewarp --backup-root=<archive> <args...>` with the subcommands `add` registers;
// returns the exit code, stdout in *out and stderr in *err.
inline int run_timewarp(const std::string& archive, std::vector<std::string> args,
                        const AddCommands& add, std::string* out = nullptr,
                        std::string* err = nullptr) {
  Config config;
  CLI::App app{"test"};
  app.name("timewarp");
  app.require_subcommand(1);
  add_config_options(app, config);
  std::function<int()> work;
  add(app, config, work);
  args.insert(args.begin(), "--backup-root=" + archive);
  args.insert(args.begin(), "timewarp");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const int parsed = parse_command_line(app, static_cast<int>(argv.size()), argv.data());
  if (parsed >= 0) return parsed;
  std::ostringstream captured_out;
  std::ostringstream captured_err;
  auto* old_out = std::cout.rdbuf(captured_out.rdbuf());
  auto* old_err = std::cerr.rdbuf(captured_err.rdbuf());
  const int code = work ? work() : -100;
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  if (out != nullptr) *out = captured_out.str();
  if (err != nullptr) *err = captured_err.str();
  return code;
}

}  // namespace tw::test
