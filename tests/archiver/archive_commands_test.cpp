// The `timewarp versions/restore/verify` subcommands, parsed and run in-process against a
// real archive.
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive_test_util.hpp"
#include "archive/store.hpp"
#include "cli/archive_commands.hpp"
#include "common/escape.hpp"

namespace tw {
namespace {

using archive::test::read_file;
using archive::test::write_file;

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

  archive::test::TempDir dir_;
  std::string archive_ = dir_ / "archive";
};

TEST_F(ArchiveCommandsTest, VersionsListsOneLinePerVersionWithTheEscapedPath) {
  const std::string path = dir_ / "src/odd\tname";
  write_file(path, "one");
  archive_file(path);
  write_file(path, "two!");
  archive_file(path);
  std::string out;
  std::string err;
  ASSERT_EQ(run({"versions", path}, &out, &err), 0) << err;
  std::istringstream lines(out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    const auto f = archive::test::fields(line);
    ASSERT_GE(f.size(), 6u) << line;
    EXPECT_EQ(f[0], std::to_string(n));
    EXPECT_EQ(f[1].size(), 30u) << f[1];  // 2026-11-22T10:00:00.000000000Z
    EXPECT_EQ(f[2], "UPDATE");
    EXPECT_EQ(f[3], n == 1 ? "3" : "4");
    EXPECT_EQ(f[4].size(), 64u);
    EXPECT_EQ(f[5], escape_bytes(path));
  }
  EXPECT_EQ(n, 2);
  // The escaped form is accepted too.
  ASSERT_EQ(run({"versions", "--escaped", escape_bytes(path)}, &out), 0);
  EXPECT_NE(run({"versions", dir_ / "src/never"}, &out, &err), 0);
  EXPECT_NE(err.find("not in the archive"), std::string::npos) << err;
}

TEST_F(ArchiveCommandsTest, RestoreByVersionTimeAndDefault) {
  const std::string path = dir_ / "src/file";
  write_file(path, "first");
  archive_file(path);
  std::string out;
  ASSERT_EQ(run({"versions", path}, &out), 0);
  const std::string first_time = archive::test::fields(out.substr(0, out.find('\n')))[1];
  write_file(path, "second");
  archive_file(path);
  std::string err;
  ASSERT_EQ(run({"restore", path, "--to", dir_ / "latest"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "latest"), "second");
  ASSERT_EQ(run({"restore", path, "--version", "1", "--to", dir_ / "v1"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "v1"), "first");
  ASSERT_EQ(run({"restore", path, "--at", first_time, "--to", dir_ / "at"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(dir_ / "at"), "first");
  EXPECT_NE(run({"restore", path, "--at", "2001-01-01T00:00:00Z", "--to", dir_ / "x"}, &out, &err),
            0);
  EXPECT_NE(run({"restore", path, "--at", "not a time", "--to", dir_ / "x"}, &out, &err), 0);
  EXPECT_NE(run({"restore", path, "--at", first_time, "--version", "1"}), 0);
  // The original path exists: refused without --force.
  write_file(path, "local edit");
  EXPECT_EQ(run({"restore", path}, &out, &err), 1);
  EXPECT_EQ(read_file(path), "local edit");
  ASSERT_EQ(run({"restore", path, "--force"}, &out, &err), 0) << err;
  EXPECT_EQ(read_file(path), "second");
}

TEST_F(ArchiveCommandsTest, VerifyExitCodeFollowsTheArchive) {
  write_file(dir_ / "src/f", "data");
  archive_file(dir_ / "src/f");
  std::string out;
  ASSERT_EQ(run({"verify"}, &out), 0) << out;
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
  // Format 1 keeps content in objects/, format 2 in packs/.
  for (const char* content : {"/objects", "/packs"}) {
    if (!std::filesystem::exists(archive_ + content)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(archive_ + content)) {
      if (entry.is_regular_file()) std::filesystem::resize_file(entry.path(), 20);
    }
  }
  EXPECT_EQ(run({"verify"}, &out), 1);
  EXPECT_NE(out.find("damaged"), std::string::npos) << out;
  EXPECT_NE(out.find(escape_bytes(dir_ / "src/f") + " v1"), std::string::npos) << out;
}

}  // namespace
}  // namespace tw
