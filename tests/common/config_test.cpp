#include <CLI/CLI.hpp>

#include "common/config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/test_support.hpp"

namespace tw {
namespace {

struct Parsed {
  int code;
  std::string err;
  Config config;
};

Parsed parse(std::vector<std::string> args) {
  Parsed p{};
  CLI::App app{"test"};
  app.name("test");
  add_config_options(app, p.config);
  args.insert(args.begin(), "test");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStderr();
  p.code = parse_command_line(app, static_cast<int>(argv.size()), argv.data());
  p.err = testing::internal::GetCapturedStderr();
  return p;
}

TEST(Config, FileKeysAndFlags) {
  test::TempDir dir;
  test::write_file(dir / "tw.toml",
                   "backup_root = \"/srv/archive\"\narchivers = 3\nbatch_size = 500\n"
                   "strategy = \"lifo\"\nsource_dirs = [\"/a\", \"/b\"]\ncoalesce = false\n");
  auto p = parse({"--config", (dir / "tw.toml").string(), "--batch-size", "7"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, "/srv/archive");
  EXPECT_EQ(p.config.archivers, 3);
  EXPECT_EQ(p.config.batch_size, 7);  // the flag wins over the file
  EXPECT_EQ(p.config.strategy, "lifo");
  EXPECT_EQ(p.config.source_dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_FALSE(p.config.coalesce);
}

TEST(Config, EnvironmentSitsBetweenFlagsAndFile) {
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "archivers = 3\nbatch_size = 9\n");
  ::setenv("MAX_ARCHIVERS", "5", 1);
  ::setenv("SCHEDULER_BATCHSIZE", "11", 1);
  auto p = parse({"--config", (dir / "tw.toml").string(), "--batch-size", "12"});
  ::unsetenv("MAX_ARCHIVERS");
  ::unsetenv("SCHEDULER_BATCHSIZE");
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.archivers, 5);    // environment over file
  EXPECT_EQ(p.config.batch_size, 12);  // flag over environment
}

TEST(Config, UnknownKeyIsNamedAndRefused) {
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "archivers = 2\nbatch_sise = 10\n");
  auto p = parse({"--config", (dir / "tw.toml").string()});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("unknown configuration key 'batch_sise'"), std::string::npos) << p.err;
}

TEST(Config, BadValuesNameTheKeyAndWhatIsAllowed) {
  auto p = parse({"--archivers", "0"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("--archivers"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("1 to 256"), std::string::npos) << p.err;

  p = parse({"--strategy", "random"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("--strategy"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("fifo"), std::string::npos) << p.err;

  test::TempDir dir;
  test::write_file(dir / "tw.toml", "batch_size = \"lots\"\n");
  p = parse({"--config", (dir / "tw.toml").string()});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("batch"), std::string::npos) << p.err;
}

TEST(Config, CompressionKeys) {
  auto p = parse({});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, 1);
  EXPECT_EQ(p.config.compression_threads, 0);

  test::TempDir dir;
  test::write_file(dir / "tw.toml", "compression_level = -5\ncompression_threads = 3\n");
  p = parse({"--config", (dir / "tw.toml").string()});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, -5);
  EXPECT_EQ(p.config.compression_threads, 3);

  ::setenv("TIMEWARP_COMPRESSION_LEVEL", "19", 1);
  p = parse({"--compression-threads", "1"});
  ::unsetenv("TIMEWARP_COMPRESSION_LEVEL");
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, 19);
  EXPECT_EQ(p.config.compression_threads, 1);

  p = parse({"--compression-level=-7"});
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.compression_level, -7);
}

// Expects `args` refused (exit status 2) with a message holding every one of `needles`.
void expect_refused(const std::vector<std::string>& args,
                    std::initializer_list<std::string_view> needles) {
  const auto p = parse(args);
  EXPECT_EQ(p.code, 2) << fmt::format("{}", fmt::join(args, " "));
  for (const auto needle : needles) EXPECT_NE(p.err.find(needle), std::string::npos) << p.err;
}

TEST(Config, BadCompressionValuesNameTheKey) {
  for (const char* bad : {"20", "-8", "fast", "1.5"}) {
    expect_refused({fmt::format("--compression-level={}", bad)}, {"compression-level"});
  }
  expect_refused({"--compression-level=20"}, {"-7 to 19"});
  for (const char* bad : {"-1", "65", "all"}) {
    expect_refused({fmt::format("--compression-threads={}", bad)}, {"compression-threads"});
  }
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "compression_threads = 100\n");
  expect_refused({"--config", (dir / "tw.toml").string()}, {"compression", "0 to 64"});
}

TEST(Config, MissingConfigFileIsAnError) {
  auto p = parse({"--config", "/nonexistent/tw.toml"});
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("/nonexistent/tw.toml"), std::string::npos) << p.err;
}

TEST(Config, ArgsForAChildRoundTrip) {
  Config c;
  c.backup_root = "/srv/a b";
  c.source_dirs = {"/x", "/y"};
  c.archivers = 4;
  c.strategy = "priority";
  c.retry_base_delay = 0.25;
  c.compression_level = -3;
  c.compression_threads = 2;
  c.database = "password=secret";
  auto args = config_to_args(c);
  for (const auto& a : args) EXPECT_EQ(a.find("secret"), std::string::npos);
  auto p = parse(args);
  ASSERT_EQ(p.code, -1) << p.err;
  EXPECT_EQ(p.config.backup_root, c.backup_root);
  EXPECT_EQ(p.config.source_dirs, c.source_dirs);
  EXPECT_EQ(p.config.archivers, 4);
  EXPECT_EQ(p.config.strategy, "priority");
  EXPECT_DOUBLE_EQ(p.config.retry_base_delay, 0.25);
  EXPECT_EQ(p.config.compression_level, -3);
  EXPECT_EQ(p.config.compression_threads, 2);
}

}  // namespace
}  // namespace tw
