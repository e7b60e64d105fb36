// Names are shown with their C0, C1 and bidirectional controls escaped wherever a person
// reads them, through the real programs: files with such names are archived by the real
// monitor, scheduler and archivers, one of them (a FIFO) fails for good, and `timewarp
// versions`, `failed`, `status`, `history`, `check` and their error messages show the
// names escaped, while --json keeps the exact escaped form that gives the bytes back.
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "common/escape.hpp"
#include "integration/monitor_fixture.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;
using test::cli_json;
using test::run_cli;

// Raw sequences a terminal or a text view would act on, and how they must be shown.
struct Control {
  std::string raw;
  std::string shown;
};
const std::vector<Control> kControls = {
    {"\xc2\x9b", "%C2%9B"},         // U+009B CONTROL SEQUENCE INTRODUCER (C1)
    {"\xc2\x85", "%C2%85"},         // U+0085 NEXT LINE (C1)
    {"\xe2\x80\xae", "%E2%80%AE"},  // U+202E RIGHT-TO-LEFT OVERRIDE
    {"\xe2\x81\xa6", "%E2%81%A6"},  // U+2066 LEFT-TO-RIGHT ISOLATE
    {"\xe2\x80\x8f", "%E2%80%8F"},  // U+200F RIGHT-TO-LEFT MARK
    {"\x9b", "%9B"},                // a C1 byte that is not UTF-8
    {"\x1b", "%1B"},                // ESC (C0)
};

::testing::AssertionResult shows_no_control(const std::string& what, const std::string& out) {
  for (const auto& c : kControls) {
    if (out.find(c.raw) != std::string::npos) {
      return ::testing::AssertionFailure() << what << " shows " << c.shown << " raw:\n"
                                           << escape_bytes(out);
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs `timewarp args...` with its stderr in the output too.
int run_cli_both(const std::vector<std::string>& args, std::string* out) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", test::cli_exe()};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run_command(argv, out);
}

TEST(DisplayEscaping, NamesWithControlsAreShownEscapedAndJsonKeepsTheirBytes) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const auto source = dir / "source";
  const std::string archive = (dir / "archive").string();
  std::filesystem::create_directories(source);
  // Every control in the name of a file, a link target and a FIFO.
  std::string name = "evil";
  std::string shown = "evil";
  for (const auto& c : kControls) {
    name += c.raw + "-";
    shown += c.shown + "-";
  }
  const std::string file = (source / (name + "txt")).string();
  const std::string fifo = (source / (name + "fifo")).string();
  const std::string link = (source / "link").string();
  test::write_file(file, "first\n");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(::symlink(file.c_str(), link.c_str()), 0);

  {
    test::MonitorProcess monitor(db, {"--backup-root=" + archive, "--source=" + source.string(),
                                      "--archivers=1", "--max-attempts=1"});
    std::string out;
    // The monitor archives the file, the link and the folder (one SCAN of the folder); the
    // FIFO, queued by hand, is refused for good (not a regular file) with its name in the
    // error.
    EXPECT_EQ(run_cli(db, {"enqueue", fifo}, &out), 0) << out;
    const auto completed = [&](const std::string& raw) {
      auto conn = db.connect();
      return conn.query(
                     "SELECT count(*) FROM timewarp.items WHERE path = $1 AND status = "
                     "'COMPLETED'",
                     escape_bytes(raw))
                 .int64(0, 0) > 0;
    };
    ASSERT_TRUE(test::wait_until(
        [&] {
          return completed(source.string()) &&
                 db.count("SELECT count(*) FROM timewarp.items WHERE status = 'FAILED'") == 1 &&
                 db.count(
                     "SELECT count(*) FROM timewarp.items WHERE status IN ('NEW', "
                     "'DISPATCHED')") == 0;
        },
        60s))
        << db.scalar(
               "SELECT string_agg(status || ' ' || coalesce(last_error, ''), '; ') FROM "
               "timewarp.items");
  }
  test::write_file(file, "second, not archived\n");  // for `check`

  const std::string root = "--backup-root=" + archive;
  std::string out;
  ASSERT_EQ(run_cli_both({root, "versions", file}, &out), 0) << out;
  EXPECT_TRUE(shows_no_control("versions", out));
  EXPECT_NE(out.find(shown + "txt"), std::string::npos) << out;
  ASSERT_EQ(run_cli_both({root, "versions", "--recursive", source.string()}, &out), 0) << out;
  EXPECT_TRUE(shows_no_control("versions --recursive", out));
  EXPECT_NE(out.find(" -> " + (source / (shown + "txt")).string()), std::string::npos) << out;
  EXPECT_NE(run_cli_both({root, "versions", fifo}, &out), 0) << out;
  EXPECT_TRUE(shows_no_control("versions of a name not archived", out));
  EXPECT_NE(out.find(shown + "fifo is not in the archive"), std::string::npos) << out;
  EXPECT_NE(run_cli_both({root, "restore", fifo, "--to", (dir / "r").string()}, &out), 0) << out;
  EXPECT_TRUE(shows_no_control("restore of a name not archived", out));
  EXPECT_EQ(run_cli_both({root, "check", source.string()}, &out), 1) << out;
  EXPECT_TRUE(shows_no_control("check", out));
  EXPECT_NE(out.find(shown + "txt"), std::string::npos) << out;

  const std::string database = "--database=" + db.conninfo();
  for (const std::vector<std::string>& args : {std::vector<std::string>{database, "failed"},
                                              {database, "status"},
                                              {database, "history", fifo}}) {
    ASSERT_EQ(run_cli_both(args, &out), 0) << out;
    EXPECT_TRUE(shows_no_control(args[1], out));
    EXPECT_NE(out.find(shown + "fifo"), std::string::npos) << args[1] << ":\n" << out;
  }

  // --json stays exact: the escaped form of the bytes, which gives them back.
  const auto failed = cli_json(db, {"failed", "--json"});
  ASSERT_EQ(failed.at("items").size(), 1u);
  const auto path = failed.at("items")[0].at("path").get<std::string>();
  EXPECT_EQ(path, escape_bytes(fifo));
  EXPECT_EQ(unescape_bytes(path), fifo);
  std::string json_out;
  EXPECT_EQ(
      test::run_command({test::cli_exe(), root, "check", "--json", source.string()}, &json_out), 1);
  const auto check = nlohmann::json::parse(json_out);
  ASSERT_FALSE(check.at("differences").empty()) << json_out;
  for (const auto& difference : check.at("differences")) {
    EXPECT_EQ(unescape_bytes(difference.at("path").get<std::string>()), file) << json_out;
  }
}

}  // namespace
}  // namespace tw
