// Bad input gets a clear message, a non-zero exit and loses nothing.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace tw {
namespace {

TEST(BadInput, UnknownConfigKeyIsNamedBeforeAnythingStarts) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  test::write_file(dir / "tw.toml", "backup_root = \"/tmp/x\"\narchivrs = 3\n");
  // A fresh database with no schema: if the monitor started anything, it would migrate.
  db.connect().exec("DROP SCHEMA timewarp CASCADE");
  std::string out;
  const int code = test::run_command(
      {"/bin/sh", "-c", "\"$0\" --config \"$1\" --database \"$2\" 2>&1", test::monitor_exe(),
       (dir / "tw.toml").string(), db.conninfo()}, &out);
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("archivrs"), std::string::npos) << out;
  EXPECT_EQ(db.scalar("SELECT count(*) FROM pg_namespace WHERE nspname = 'timewarp'"), "0");
}

TEST(BadInput, BadValueNamesKeyValueAndWhatIsAllowed) {
  std::string out;
  const int code = test::run_command(
      {"/bin/sh", "-c", "\"$0\" --backup-root /tmp/x --batch-size 0 2>&1", test::monitor_exe()}, &out);
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--batch-size"), std::string::npos) << out;
  EXPECT_NE(out.find("0"), std::string::npos) << out;
  EXPECT_NE(out.find("1 to 100000"), std::string::npos) << out;
}

TEST(BadInput, UnreachableDatabaseNamesTheHostNotThePassword) {
  std::string out;
  const int code = test::run_command(
      {"/bin/sh", "-c", "\"$0\" --backup-root /tmp/x --database \"$1\" 2>&1", test::monitor_exe(),
       "host=127.0.0.1 port=1 user=ann password=sw0rdfish dbname=tw connect_timeout=5"}, &out);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("host=127.0.0.1"), std::string::npos) << out;
  EXPECT_EQ(out.find("sw0rdfish"), std::string::npos) << out;
}

TEST(BadInput, ALogFileThatCannotBeOpenedIsNamedAndExitsTwo) {
  test::TempDir dir;
  const auto missing_dir = dir / "no-such-dir";
  const std::vector<std::pair<std::string, std::string>> bad_files = {
      {(missing_dir / "tw.log").string(), "No such file or directory"},
      {dir.path().string(), "Is a directory"}};
  // Each program with what it needs to get past its command line (the CLI a subcommand);
  // stdin is empty, so a program that went on would stop at once rather than wait.
  const std::vector<std::vector<std::string>> programs = {
      {test::monitor_exe()}, {test::scheduler_exe()}, {test::archiver_exe()},
      {test::cli_exe(), "status"}};
  for (const auto& [log_file, reason] : bad_files) {
    for (const auto& program : programs) {
      std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" </dev/null 2>&1",
                                       program[0], "--backup-root=" + (dir / "archive").string(),
                                       "--database=host=127.0.0.1 port=1 connect_timeout=5",
                                       "--log-file=" + log_file};
      argv.insert(argv.end(), program.begin() + 1, program.end());
      std::string out;
      const int code = test::run_command(argv, &out);
      EXPECT_EQ(code, 2) << program[0] << " " << log_file << ": " << out;
      EXPECT_NE(out.find("cannot open log file '" + log_file + "': " + reason), std::string::npos)
          << program[0] << ": " << out;
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << program[0] << ": " << out;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(missing_dir)) << "a missing directory was created";
}

TEST(BadInput, SubcommandNumbersAreReadLikeConfigurationKeys) {
  // Refused before the database is asked (it would not answer on port 1: exit status 1).
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"prune", "--older-than", "nan"}, "--older-than: value 'nan'"},
      {{"prune", "--older-than=-inf"}, "--older-than: value '-inf'"},
      {{"status", "--interval", "NaN"}, "--interval: value 'NaN'"},
      {{"archivers", "--wait", "nan", "3"}, "--wait: value 'nan'"},
      {{"archivers", "0x2"}, "value '0x2' is not a whole number in base 10"},
      {{"retry", "010", "0x10"}, "value '0x10' is not a whole number in base 10"},
      {{"history", "/x", "--limit", "-1"}, "--limit: value '-1' is out of range"},
      {{"enqueue", "/x", "--priority", "4294967297"}, "--priority: value '4294967297'"},
      {{"restore", "/x", "--version", "-1"}, "--version: value '-1' is negative"},
  };
  for (const auto& [args, message] : refused) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", test::cli_exe(),
                                     "--database=host=127.0.0.1 port=1 connect_timeout=5"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string out;
    EXPECT_EQ(test::run_command(argv, &out), 2) << args[0] << ": " << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
  }
}

TEST(BadInput, EnqueueOfAMissingPathSaysSoAndEnqueuesNothingForIt) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  test::write_file(dir / "present", "x");
  std::string out;
  const int code = test::run_command(
      {"/bin/sh", "-c", "\"$0\" --database \"$1\" enqueue \"$2\" \"$3\" 2>&1", test::cli_exe(),
       db.conninfo(), (dir / "missing").string(), (dir / "present").string()}, &out);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("missing"), std::string::npos) << out;
  EXPECT_NE(out.find("No such file"), std::string::npos) << out;
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items"), 1);
  EXPECT_EQ(db.scalar("SELECT path FROM timewarp.items"), (dir / "present").string());
}

}  // namespace
}  // namespace tw
