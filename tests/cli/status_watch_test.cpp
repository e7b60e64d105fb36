// `timewarp status --watch`: frames without escape codes on a pipe, redrawn in place (with
// colour) on a terminal, one JSON document per line with --json, a progress bar that moves
// as the backlog drains, a clean end on SIGINT, a lost database shown, not fatal, and the
// archive read once a minute at most.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "archive/store.hpp"
#include "cli/cli_test_util.hpp"
#include "common/process.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::count_of;
using test::run_cli;
using test::sql;

TEST(StatusWatch, FramesFollowEachOtherWithoutEscapeCodesOnAPipe) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::insert_items(db, 4, "w");
  std::string out;
  ASSERT_EQ(run_cli(db, {"status", "--watch", "--count", "3", "--interval", "0.1"}, &out), 0)
      << out;
  EXPECT_EQ(count_of(out, "TimeWarp status at "), 3u) << out;
  EXPECT_EQ(count_of(out,
                     "draining    [------------------------------]   0%  0 done since watching "
                     "began, 4 to go\n"),
            3u)
      << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
}

TEST(StatusWatch, JsonWatchPrintsOneDocumentPerLine) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::insert_items(db, 2, "j");
  std::string out;
  ASSERT_EQ(run_cli(db, {"status", "--watch", "--json", "--count", "2", "--interval", "0.1"}, &out),
            0);
  std::istringstream lines(out);
  std::string line;
  int frame = 0;
  while (std::getline(lines, line)) {
    ++frame;
    const json doc = json::parse(line);
    EXPECT_EQ(doc.at("watch").at("frame"), frame);
    EXPECT_EQ(doc.at("watch").at("remaining"), 2);
    EXPECT_EQ(doc.at("watch").at("done_since_start"), 0);
    EXPECT_EQ(doc.at("backlog").at("claimable"), 2);
  }
  EXPECT_EQ(frame, 2) << out;
}

// The archive's section is read on the first frame and then at most once a minute: the
// frames that follow show the same figures, older.
TEST(StatusWatch, TheArchiveIsReadOnceAMinuteAtMost) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const std::string root = (dir / "archive").string();
  ASSERT_TRUE(archive::Store::open(root, archive::Store::Mode::ReadWrite));  // made empty
  std::string out;
  ASSERT_EQ(run_cli(db,
                    {"--backup-root=" + root, "status", "--watch", "--json", "--count", "3",
                     "--interval", "0.1"},
                    &out),
            0);
  std::istringstream lines(out);
  std::string line;
  std::vector<json> frames;
  while (std::getline(lines, line)) frames.push_back(json::parse(line));
  ASSERT_EQ(frames.size(), 3u) << out;
  const json& first = frames[0].at("archive");
  EXPECT_EQ(first.at("blobs"), 0);
  EXPECT_EQ(first.at("age_seconds"), 0.0) << "the first frame reads it";
  // Each later frame shows them older than the one before. (Not by the interval exactly:
  // the interval runs from the start of a frame, the figures' age from their reading.)
  double previous_age = 0;
  for (std::size_t i = 1; i < frames.size(); ++i) {
    const json& later = frames[i].at("archive");
    EXPECT_EQ(later.at("read_at"), first.at("read_at")) << "frame " << i + 1;
    const double age = later.at("age_seconds").get<double>();
    EXPECT_GT(age, previous_age) << "frame " << i + 1;
    EXPECT_LT(age, 30.0) << "frame " << i + 1;
    previous_age = age;
  }
  // Without --json the later frames say how old the figures are.
  ASSERT_EQ(
      run_cli(db,
              {"--backup-root=" + root, "status", "--watch", "--count", "2", "--interval", "1.1"},
              &out),
      0);
  EXPECT_EQ(count_of(out, "archive     " + root + " (format 2): "), 2u) << out;
  EXPECT_EQ(count_of(out, "a watch reads the archive once a minute"), 1u) << out;
}

// Reads the watch's output until `needle` shows up, within `timeout`.
bool read_until(ChildProcess& child, std::string& seen, const std::string& needle,
                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (seen.find(needle) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    std::string line;
    if (child.read_line(line, left) != ChildProcess::ReadStatus::Line) return false;
    seen += line + "\n";
  }
  return true;
}

TEST(StatusWatch, ProgressBarFillsAsTheBacklogDrainsAndSigintEndsCleanly) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::insert_items(db, 10, "drain");
  auto child = make_process_launcher()->launch(
      {test::cli_exe(),
       {"--database=" + db.conninfo(), "status", "--watch", "--interval", "0.1"},
       {}});
  std::string seen;
  ASSERT_TRUE(read_until(*child, seen, "   0%  0 done since watching began, 10 to go", 20s))
      << seen;

  sql(db, "UPDATE timewarp.items SET status = 'COMPLETED', finished_at = now() WHERE id <= 5");
  ASSERT_TRUE(read_until(
      *child, seen, "[###############---------------]  50%  5 done since watching began, 5 to go",
      20s))
      << seen;
  ASSERT_TRUE(read_until(*child, seen, "5 completed in the last minute", 20s)) << seen;

  sql(db,
      "UPDATE timewarp.items SET status = 'FAILED', finished_at = now(), last_error = 'x' WHERE id "
      "= 6");
  sql(db, "UPDATE timewarp.items SET status = 'COMPLETED', finished_at = now() WHERE id > 6");
  ASSERT_TRUE(read_until(
      *child, seen, "[##############################] 100%  10 done since watching began, 0 to go",
      20s))
      << seen;
  ASSERT_TRUE(read_until(*child, seen, "queue drained", 20s)) << seen;

  ::kill(child->pid(), SIGINT);
  const auto status = child->wait_exit(20s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << "SIGINT ends the watch cleanly";
}

// SIGINT may land while a frame is being read from the database, not only between frames:
// it still ends the watch cleanly. The delays walk across a whole interval.
TEST(StatusWatch, SigintAtAnyMomentOfTheFrameEndsCleanly) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::insert_items(db, 3, "any");
  for (int delay_ms = 0; delay_ms < 100; delay_ms += 9) {
    auto child = make_process_launcher()->launch(
        {test::cli_exe(),
         {"--database=" + db.conninfo(), "status", "--watch", "--interval", "0.1"},
         {}});
    std::string seen;
    ASSERT_TRUE(read_until(*child, seen, "3 to go", 20s)) << seen;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(child->pid(), SIGINT);
    const auto status = child->wait_exit(20s);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(*status, 0) << "SIGINT " << delay_ms << " ms after the first frame";
  }
}

// Runs the watch on a pseudo-terminal and returns everything it wrote.
std::string run_on_terminal(const test::TestDatabase& db, const std::vector<std::string>& args,
                            const std::vector<std::pair<std::string, std::string>>& env) {
  int master = -1;
  winsize size{};
  size.ws_row = 50;
  size.ws_col = 120;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
  if (pid < 0) return "forkpty failed";
  if (pid == 0) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<std::string> argv{test::cli_exe(), "--database=" + db.conninfo()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  std::string out;
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd fd{master, POLLIN, 0};
    if (::poll(&fd, 1, 200) <= 0) continue;
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) break;  // EIO once the child has gone
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    out += "\n[exit status " + std::to_string(status) + "]";
  return out;
}

TEST(StatusWatch, OnATerminalFramesRedrawInPlaceWithColour) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  sql(db,
      "INSERT INTO timewarp.items (op, path, status, last_error, finished_at) "
      "VALUES ('UPDATE', '/x', 'FAILED', 'boom', now())");
  const std::string out =
      run_on_terminal(db, {"status", "--watch", "--count", "2", "--interval", "0.1"},
                      {{"TERM", "xterm"}, {"NO_COLOR", ""}});
  EXPECT_EQ(out.find("[exit status"), std::string::npos) << out;
  // The first frame clears the screen; the next goes back to the top-left corner; lines
  // clear their rest; the screen below the frame is cleared.
  EXPECT_EQ(out.rfind("\x1b[H\x1b[2J", 0), 0u) << out;
  EXPECT_EQ(count_of(out, "\x1b[H"), 2u) << out;
  EXPECT_GE(count_of(out, "\x1b[K"), 20u) << out;
  EXPECT_EQ(count_of(out, "\x1b[J"), 2u) << out;
  EXPECT_NE(out.find("\x1b[1mTimeWarp status at "), std::string::npos) << out;
  EXPECT_NE(out.find("\x1b[31m1 in the last hour\x1b[0m"), std::string::npos) << out;

  // NO_COLOR keeps the redraw but drops the colour.
  const std::string plain = run_on_terminal(db, {"status", "--watch", "--count", "1"},
                                            {{"TERM", "xterm"}, {"NO_COLOR", "1"}});
  EXPECT_EQ(plain.rfind("\x1b[H\x1b[2J", 0), 0u) << plain;
  EXPECT_EQ(plain.find("\x1b[1m"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("\x1b[31m"), std::string::npos) << plain;
  EXPECT_NE(plain.find("1 in the last hour"), std::string::npos) << plain;
}

TEST(StatusWatch, LostDatabaseIsShownAndTheWatchGoesOn) {
  std::string out;
  ASSERT_EQ(test::run_command(
                {test::cli_exe(), "--database=host=127.0.0.1 port=1 dbname=x connect_timeout=2",
                 "status", "--watch", "--count", "2", "--interval", "0.1"},
                &out),
            0)
      << out;
  EXPECT_EQ(count_of(out, "TimeWarp status: database unreachable: "), 2u) << out;

  ASSERT_EQ(test::run_command(
                {test::cli_exe(), "--database=host=127.0.0.1 port=1 dbname=x connect_timeout=2",
                 "status", "--watch", "--json", "--count", "1"},
                &out),
            0);
  const json doc = json::parse(out);
  EXPECT_NE(doc.at("error").get<std::string>().find("cannot connect"), std::string::npos) << out;
}

}  // namespace
}  // namespace tw
