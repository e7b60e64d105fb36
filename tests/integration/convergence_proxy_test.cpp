// The convergence trial's retry fault, timewarp-fault-archiver: it forwards to the real
// archiver, fails each chosen item once (before forwarding or after the archiver's answer),
// passes SIGTERM on, and never leaves the real archiver running, whatever ends it.
#include <gtest/gtest.h>

#include <signal.h>

#include <set>

#include "common/escape.hpp"
#include "common/protocol.hpp"
#include "integration/convergence_system.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

class FaultArchiver : public ::testing::Test {
 protected:
  std::unique_ptr<ChildProcess> start(int permille) {
    std::filesystem::create_directories(dir_ / "state");
    test::write_file(dir_ / "src" / "f", "content");
    LaunchSpec spec{test::convergence::fault_archiver_path(),
                    {"--fault-real=" + test::archiver_exe(), "--fault-seed=7",
                     "--fault-retry-permille=" + std::to_string(permille),
                     "--fault-state=" + (dir_ / "state").string(),
                     "--fault-log=" + (dir_ / "proxy.log").string(),
                     "--backup-root=" + (dir_ / "archive").string(), "--log-level=warn"},
                    {}};
    auto proxy = make_process_launcher()->launch(spec);
    // The real archiver is its child.
    EXPECT_TRUE(test::wait_until(
        [&] { return test::convergence::running_children(proxy->pid()).size() == 1; }, 10s));
    return proxy;
  }
  Response ask(ChildProcess& proxy, std::int64_t id) {
    const std::string request =
        format_request({id, Op::Update, escape_bytes((dir_ / "src" / "f").string()), "", {}});
    EXPECT_TRUE(proxy.write_line(request));
    std::string line;
    EXPECT_EQ(proxy.read_line(line, 30s), ChildProcess::ReadStatus::Line);
    auto parsed = parse_response(line);
    EXPECT_TRUE(parsed.ok()) << line;
    return parsed.ok() ? parsed.value() : Response{};
  }
  test::TempDir dir_owner_;
  const std::filesystem::path dir_ = dir_owner_.path();
};

TEST_F(FaultArchiver, FailsEachChosenItemOnceThenForwardsIt) {
  auto proxy = start(1000);  // every item chosen
  std::set<std::string> kinds;
  for (std::int64_t id = 1; id <= 8; ++id) {
    const Response first = ask(*proxy, id);
    EXPECT_EQ(first.id, id);
    EXPECT_EQ(first.outcome, Outcome::FailedRetry);
    EXPECT_EQ(first.message.rfind("injected: ", 0), 0u) << first.message;
    kinds.insert(first.message.rfind("injected: not forwarded", 0) == 0 ? "before" : "after");
    const Response again = ask(*proxy, id);
    EXPECT_EQ(again.outcome, Outcome::Complete) << again.message;
  }
  // Both kinds occur: not forwarded, and forwarded with the archiver's answer dropped.
  EXPECT_EQ(kinds.size(), 2u);
  proxy->close_stdin();
  EXPECT_EQ(proxy->wait_exit(30s), 0);
}

TEST_F(FaultArchiver, ForwardsEverythingWhenNoItemIsChosen) {
  auto proxy = start(0);
  for (std::int64_t id = 1; id <= 5; ++id) EXPECT_EQ(ask(*proxy, id).outcome, Outcome::Complete);
  const pid_t real = test::convergence::running_children(proxy->pid()).front();
  proxy->close_stdin();
  EXPECT_EQ(proxy->wait_exit(30s), 0);
  EXPECT_FALSE(test::convergence::running(real));
}

TEST_F(FaultArchiver, SigtermReachesTheArchiverAndBothExit) {
  auto proxy = start(0);
  ASSERT_EQ(ask(*proxy, 1).outcome, Outcome::Complete);
  const pid_t real = test::convergence::running_children(proxy->pid()).front();
  ::kill(proxy->pid(), SIGTERM);
  EXPECT_EQ(proxy->wait_exit(30s), 0);
  EXPECT_FALSE(test::convergence::running(real));
}

TEST_F(FaultArchiver, KilledProxyTakesTheArchiverWithIt) {
  auto proxy = start(0);
  ASSERT_EQ(ask(*proxy, 1).outcome, Outcome::Complete);
  const pid_t real = test::convergence::running_children(proxy->pid()).front();
  ::kill(proxy->pid(), SIGKILL);
  proxy->wait_exit(30s);
  EXPECT_TRUE(test::wait_until([&] { return !test::convergence::running(real); }, 10s));
}

}  // namespace
}  // namespace tw
