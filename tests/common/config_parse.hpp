// How the configuration tests parse a command line: `test` with every key's option, its exit
// code (-1: go on), what it printed and the configuration it read.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include "common/config.hpp"

namespace tw::test {

struct Parsed {
  int code;
  std::string out;
  std::string err;
  Config config;
};

inline Parsed parse(std::vector<std::string> args, ConfigSearch search = ConfigSearch::Off) {
  Parsed p{};
  CLI::App app{"test"};
  app.name("test");
  add_config_options(app, p.config);
  args.insert(args.begin(), "test");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  p.code = parse_command_line(app, static_cast<int>(argv.size()), argv.data(), search, &p.config);
  p.err = testing::internal::GetCapturedStderr();
  p.out = testing::internal::GetCapturedStdout();
  return p;
}

}  // namespace tw::test
