// The example configuration shipped in packaging/ (installed as /etc/timewarp/timewarp.toml)
// names every configuration key with its real default, and parses, as shipped and with
// every commented key switched on.
#include <map>
#include <regex>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "common/config.hpp"

namespace tw {
namespace {

constexpr const char* kConfigGroup = "Configuration (file key, flag or environment)";

// Key (file spelling) -> the program's default, as CLI11 reports it.
std::map<std::string, std::string> program_keys() {
  CLI::App app;
  Config config;
  add_config_options(app, config);
  std::map<std::string, std::string> keys;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group() != kConfigGroup) continue;
    std::string key;
    for (const auto& name : option->get_lnames()) {
      if (key.empty() || name.find('_') != std::string::npos) key = name;
    }
    keys[key] = option->get_default_str();
  }
  return keys;
}

// Key -> value for the example's "# key = value" lines (commented) and "key = value"
// lines (active).
std::map<std::string, std::string> example_keys(bool commented) {
  const std::regex line_re(commented ? R"(^# ([a-z_]+) = (.*)$)" : R"(^([a-z_]+) = (.*)$)");
  std::map<std::string, std::string> keys;
  std::istringstream in(test::read_file(TW_EXAMPLE_CONFIG));
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, line_re)) keys[m[1]] = m[2];
  }
  return keys;
}

std::string unquote(std::string v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
  return v;
}

bool same_default(const std::string& example, const std::string& program) {
  const std::string e = unquote(example);
  if (e == program) return true;
  if ((e == "true" && program == "1") || (e == "false" && program == "0")) return true;
  try {
    std::size_t used_e = 0, used_p = 0;
    const double de = std::stod(e, &used_e);
    const double dp = std::stod(program, &used_p);
    return used_e == e.size() && used_p == program.size() && de == dp;
  } catch (const std::exception&) {
    return false;
  }
}

TEST(ExampleConfig, NamesEveryKeyWithItsDefault) {
  const auto program = program_keys();
  ASSERT_GT(program.size(), 20u);
  const auto commented = example_keys(true);
  const auto active = example_keys(false);
  for (const auto& [key, default_value] : program) {
    const bool in_commented = commented.count(key) != 0;
    const bool in_active = active.count(key) != 0;
    EXPECT_TRUE(in_commented || in_active) << "the example does not mention '" << key << "'";
    // Lists, and keys whose default is empty or set for the service, show an example value.
    if (!in_commented || default_value.empty() || default_value.front() == '[') continue;
    EXPECT_TRUE(same_default(commented.at(key), default_value))
        << key << ": example says " << commented.at(key) << ", the program's default is "
        << default_value;
  }
  for (const auto& [key, value] : commented)
    EXPECT_TRUE(program.count(key)) << "unknown key " << key;
  for (const auto& [key, value] : active) EXPECT_TRUE(program.count(key)) << "unknown key " << key;
}

TEST(ExampleConfig, ParsesAsShippedAndWithEveryKeyOn) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  std::string out;
  ASSERT_EQ(test::run_cli(db, {"--config", TW_EXAMPLE_CONFIG, "status", "--json"}, &out), 0) << out;

  test::TempDir dir;
  std::istringstream in(test::read_file(TW_EXAMPLE_CONFIG));
  std::string line, all_on;
  const std::regex key_line(R"(^# ([a-z_]+ = .*)$)");
  std::smatch m;
  const std::regex log_file_line(R"(^log_file = .*$)");
  while (std::getline(in, line)) {
    std::string on = std::regex_match(line, m, key_line) ? std::string(m[1]) : line;
    // The service's log folder exists only where the package is installed: log into the
    // test's own folder instead (a file that cannot be opened stops every program).
    if (std::regex_match(on, log_file_line))
      on = fmt::format("log_file = \"{}\"", (dir / "timewarp.log").string());
    all_on += on + "\n";
  }
  test::write_file(dir / "all.toml", all_on);
  ASSERT_EQ(test::run_cli(db, {"--config", (dir / "all.toml").string(), "status", "--json"}, &out),
            0)
      << all_on << out;
  // And a file is really read: a wrong value is refused.
  test::write_file(dir / "bad.toml", "archivers = 0\n");
  EXPECT_EQ(test::run_cli(db, {"--config", (dir / "bad.toml").string(), "status"}, &out), 2);
}

}  // namespace
}  // namespace tw
