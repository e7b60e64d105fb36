// The fixture of the `timewarp` archive subcommands' tests (archive_commands_test,
// archive_output_test): the subcommands parsed and run in-process against a real archive,
// their output captured.
#pragma once

#include <cstdint>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "archive/store.hpp"
#include "archive_test_util.hpp"
#include "cli/archive_commands.hpp"
#include "cli/retention_commands.hpp"

namespace tw {

class ArchiveCommandsTest : public ::testing::Test {
 protected:
  // Runs `timewarp <args...>` with the archive as backup root; returns the exit code.
  int run(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr) {
    Config config;
    CLI::App app{"test"};
    app.name("timewarp");
    app.require_subcommand(1);
    add_config_options(app, config);
    std::function<int()> work;
    add_archive_commands(app, config, work);
    add_retention_commands(app, config, work);
    args.insert(args.begin(), "--backup-root=" + archive_);
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

  void archive_file(const std::string& path) {
    auto store = archive::Store::open(archive_, archive::Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    ASSERT_EQ(store->update(path).outcome, Outcome::Complete);
  }

  void archive_deletion(const std::string& path) {
    auto store = archive::Store::open(archive_, archive::Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    ASSERT_EQ(store->remove(path).outcome, Outcome::Complete);
  }

  // The version numbers `versions --json` lists for `path`; none when it fails.
  std::vector<std::uint64_t> version_numbers(const std::string& path) {
    std::string out;
    if (run({"versions", "--json", path}, &out) != 0) return {};
    const auto doc = nlohmann::json::parse(out);  // outlives the loop over its parts
    std::vector<std::uint64_t> numbers;
    for (const auto& v : doc.at("paths").at(0).at("versions")) numbers.push_back(v.at("number"));
    return numbers;
  }

  archive::test::TempDir dir_;
  std::string archive_ = dir_ / "archive";
};

}  // namespace tw
