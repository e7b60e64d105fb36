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
#include "cli_in_process.hpp"
#include "cli/archive_commands.hpp"
#include "cli/retention_commands.hpp"

namespace tw {

class ArchiveCommandsTest : public ::testing::Test {
 protected:
  // Runs `timewarp <args...>` with the archive as backup root; returns the exit code.
  int run(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr) {
    return test::run_timewarp(
        archive_, std::move(args),
        [](CLI::App& app, Config& config, std::function<int()>& work) { add_archive_commands(app, config, work); add_retention_commands(app, config, work); }, out, err);
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
