#include "common/process.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <set>
#include <string>

namespace tw {
namespace {

using namespace std::chrono_literals;

TEST(Process, LinesGoBothWays) {
  auto launcher = make_process_launcher();
  auto child = launcher->launch({"/bin/cat", {}, {}});
  ASSERT_TRUE(child->write_line("hello\tworld"));
  std::string line;
  ASSERT_EQ(child->read_line(line, 5s), ChildProcess::ReadStatus::Line);
  EXPECT_EQ(line, "hello\tworld");
  EXPECT_EQ(child->read_line(line, 50ms), ChildProcess::ReadStatus::Timeout);
  child->close_stdin();
  EXPECT_EQ(child->read_line(line, 5s), ChildProcess::ReadStatus::Eof);
  EXPECT_EQ(child->wait_exit(5s), 0);
}

TEST(Process, SiblingsDoNotInheritEachOthersPipes) {
  auto launcher = make_process_launcher();
  auto first = launcher->launch({"/bin/cat", {}, {}});
  auto second = launcher->launch({"/bin/cat", {}, {}});  // started while first's pipes are open
  first->close_stdin();
  // If the second cat held the first one's stdin, the first would never see EOF.
  EXPECT_TRUE(first->wait_exit(5s).has_value());
  second->close_stdin();
  EXPECT_TRUE(second->wait_exit(5s).has_value());
}

TEST(Process, TerminateEscalatesToSigkill) {
  auto launcher = make_process_launcher();
  // A child that ignores SIGTERM.
  auto child = launcher->launch(
      {"/bin/sh", {"-c", "trap '' TERM; echo trapped; while :; do sleep 0.05; done"}, {}});
  std::string line;
  ASSERT_EQ(child->read_line(line, 5s), ChildProcess::ReadStatus::Line);  // trap installed
  const auto start = std::chrono::steady_clock::now();
  const int status = child->terminate(200ms);
  EXPECT_EQ(status, 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Process, ChildrenStartWithDefaultSignalHandling) {
  // The monitor and scheduler block SIGTERM for their signalfd; their children must not
  // inherit that, or terminate() could only ever end in SIGKILL.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  auto launcher = make_process_launcher();
  auto child = launcher->launch({"/bin/sh", {"-c", "echo up; exec sleep 30"}, {}});
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  std::string line;
  ASSERT_EQ(child->read_line(line, 5s), ChildProcess::ReadStatus::Line);
  EXPECT_EQ(child->terminate(10s), 128 + SIGTERM);
}

TEST(Process, ExitStatusAndEnvironment) {
  auto launcher = make_process_launcher();
  auto child = launcher->launch({"/bin/sh", {"-c", "echo \"$TW_X\"; exit 7"}, {{"TW_X", "v a"}}});
  std::string line;
  ASSERT_EQ(child->read_line(line, 5s), ChildProcess::ReadStatus::Line);
  EXPECT_EQ(line, "v a");
  EXPECT_EQ(child->wait_exit(5s), 7);
}

TEST(Process, AChildInheritsOnlyTheVariablesItIsGiven) {
  ::setenv("TW_PROCESS_TEST_KEPT", "kept", 1);
  ::setenv("TW_PROCESS_TEST_SECRET", "secret", 1);
  ::setenv("LC_PROCESS_TEST", "locale", 1);
  auto launcher = make_process_launcher();
  const auto environment = [&](LaunchSpec spec) {
    auto child = launcher->launch(spec);
    std::set<std::string> lines;
    std::string line;
    while (child->read_line(line, 5s) == ChildProcess::ReadStatus::Line) lines.insert(line);
    EXPECT_EQ(child->wait_exit(5s), 0);
    return lines;
  };
  LaunchSpec spec{"/usr/bin/env", {}, {{"TW_PROCESS_TEST_SET", "set"}}};
  const auto all = environment(spec);
  EXPECT_TRUE(all.count("TW_PROCESS_TEST_SECRET=secret"));  // by default: everything
  spec.inherit_env = std::vector<std::string>{"TW_PROCESS_TEST_KEPT", "LC_*"};
  const auto some = environment(spec);
  for (const auto& entry : some) {
    EXPECT_TRUE(entry == "TW_PROCESS_TEST_KEPT=kept" || entry == "TW_PROCESS_TEST_SET=set" ||
                entry.rfind("LC_", 0) == 0)
        << entry;
  }
  EXPECT_TRUE(some.count("TW_PROCESS_TEST_KEPT=kept"));
  EXPECT_TRUE(some.count("LC_PROCESS_TEST=locale"));
  EXPECT_TRUE(some.count("TW_PROCESS_TEST_SET=set"));
  ::unsetenv("TW_PROCESS_TEST_KEPT");
  ::unsetenv("TW_PROCESS_TEST_SECRET");
  ::unsetenv("LC_PROCESS_TEST");
}

TEST(Process, MissingExecutableIsAClearError) {
  auto launcher = make_process_launcher();
  try {
    launcher->launch({"/nonexistent/timewarp-archiver", {}, {}});
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/timewarp-archiver"), std::string::npos);
  }
}

}  // namespace
}  // namespace tw
