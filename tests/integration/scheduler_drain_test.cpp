// The real timewarp-scheduler driven over its signal pipe, with the fault-injecting archiver
// and a real PostgreSQL.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/process.hpp"
#include "db/queue.hpp"
#include "support/test_support.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

class SchedulerDrain : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_REQUIRE_DATABASE();
    db_ = std::make_unique<test::TestDatabase>();
    record_ = (dir_ / "record.log").string();
  }

  void start(std::vector<std::string> extra = {}) {
    LaunchSpec spec{
        test::scheduler_exe(),
        {"--backup-root=" + (dir_ / "archive").string(),
         "--archiver-exe=" + test::fake_archiver_exe(), "--archiver-arg=--record=" + record_,
         "--flush-interval=0.01", "--heartbeat-interval=0.2", "--log-level=info"},
        {{"TIMEWARP_DATABASE", db_->conninfo()}}};
    for (auto& e : extra) spec.args.push_back(std::move(e));
    scheduler_ = launcher_->launch(spec);
  }

  std::vector<std::int64_t> enqueue(const std::vector<std::string>& paths,
                                    std::optional<std::int64_t> size = {}) {
    auto conn = db_->connect();
    db::Queue q(conn);
    std::vector<db::NewItem> items;
    for (const auto& p : paths) items.push_back({Op::Update, p, "", "/src", 0, size, {}});
    return q.enqueue(items);
  }

  // Sends READY and waits for the scheduler's READY (the queue drained).
  void drain(std::chrono::seconds timeout = 60s) {
    ASSERT_TRUE(scheduler_->write_line("READY"));
    std::string line;
    ASSERT_EQ(scheduler_->read_line(line, timeout), ChildProcess::ReadStatus::Line);
    ASSERT_EQ(line, "READY");
  }

  std::string status_of(std::int64_t id) {
    return db_->scalar(fmt::format("SELECT status FROM timewarp.items WHERE id = {}", id));
  }

  std::map<std::int64_t, int> runs() {
    std::map<std::int64_t, int> out;
    std::istringstream in(test::read_file(record_));
    std::int64_t id;
    while (in >> id) ++out[id];
    return out;
  }

  test::TempDir dir_;
  std::unique_ptr<test::TestDatabase> db_;
  std::string record_;
  std::shared_ptr<Launcher> launcher_ = make_process_launcher();
  std::unique_ptr<ChildProcess> scheduler_;
};

TEST_F(SchedulerDrain, DrainsEverythingThenSaysReady) {
  start({"--archivers=2", "--batch-size=50"});
  std::vector<std::string> paths;
  for (int i = 0; i < 1000; ++i) paths.push_back(fmt::format("/src/file{}", i));
  enqueue(paths);
  drain();
  EXPECT_EQ(db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'"), 1000);
  const auto r = runs();
  EXPECT_EQ(r.size(), 1000u);
  for (const auto& [id, n] : r) EXPECT_EQ(n, 1) << "item " << id;
  EXPECT_GE(
      db_->count("SELECT count(*) FROM timewarp.batches WHERE drained_at IS NOT NULL OR true"), 20);
  scheduler_->close_stdin();  // EOF means STOP
  EXPECT_EQ(scheduler_->wait_exit(30s), 0);
  EXPECT_EQ(db_->scalar("SELECT stopped_at IS NOT NULL FROM timewarp.schedulers"), "t");
}

// The archive settings given to the scheduler (by the monitor, from the config file) reach
// every archiver it starts.
TEST_F(SchedulerDrain, ArchiversGetTheArchiveSettings) {
  const std::string settings = (dir_ / "settings.log").string();
  start({"--archivers=2", "--compression-level=7", "--compression-threads=3",
         "--archiver-arg=--record-config=" + settings});
  const auto lines = [&] {
    const std::string text = test::read_file(settings);
    return std::count(text.begin(), text.end(), '\n');
  };
  ASSERT_TRUE(test::wait_until([&] { return lines() == 2; }, 30s)) << test::read_file(settings);
  const std::string expected = fmt::format(
      "backup_root={} compression_level=7 compression_threads=3\n", (dir_ / "archive").string());
  EXPECT_EQ(test::read_file(settings), expected + expected);
  ASSERT_TRUE(scheduler_->write_line("STOP"));
  EXPECT_EQ(scheduler_->wait_exit(30s), 0);
}

TEST_F(SchedulerDrain, ArchiverFaultsCountAsFailedAttemptsAndNeverStopTheOthers) {
  start({"--archivers=2", "--batch-size=5", "--max-attempts=2", "--retry-base-delay=0",
         "--retry-max-delay=0", "--item-timeout=1"});
  const auto ids = enqueue({"/src/crash", "/src/hang", "/src/garbage", "/src/retry",
                            "/src/permanent", "/src/vanished", "/src/ok1", "/src/ok2"});
  drain();
  // Faults with attempts left went back to NEW at once (no delay); drain until settled.
  ASSERT_TRUE(test::wait_until(
      [&] {
        if (db_->count(
                "SELECT count(*) FROM timewarp.items WHERE status IN ('NEW', 'DISPATCHED')") == 0)
          return true;
        drain();
        return false;
      },
      120s, 10ms));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(status_of(ids[i]), "FAILED") << i;
  // The response's outcome decides, never its message's text: a FAILED PERMANENT that
  // reads "vanished: ..." is a failure like any other.
  EXPECT_EQ(status_of(ids[5]), "FAILED");
  EXPECT_EQ(status_of(ids[6]), "COMPLETED");
  EXPECT_EQ(status_of(ids[7]), "COMPLETED");
  EXPECT_EQ(db_->scalar(fmt::format("SELECT attempts FROM timewarp.items WHERE id = {}", ids[0])),
            "2");
  EXPECT_EQ(db_->scalar(fmt::format("SELECT attempts FROM timewarp.items WHERE id = {}", ids[4])),
            "1");
  EXPECT_NE(db_->scalar(fmt::format("SELECT last_error FROM timewarp.items WHERE id = {}", ids[1]))
                .find("item_timeout"),
            std::string::npos);
  EXPECT_NE(db_->scalar(fmt::format("SELECT last_error FROM timewarp.items WHERE id = {}", ids[2]))
                .find("garbage"),
            std::string::npos);
  EXPECT_NE(db_->scalar(fmt::format("SELECT last_error FROM timewarp.items WHERE id = {}", ids[0]))
                .find("exited"),
            std::string::npos);
  ASSERT_TRUE(scheduler_->write_line("STOP"));
  EXPECT_EQ(scheduler_->wait_exit(30s), 0);
}

TEST_F(SchedulerDrain, StopInTheMiddleOfABatchReturnsUnstartedItems) {
  start({"--archivers=1", "--batch-size=100", "--archiver-arg=--delay-ms=20"});
  std::vector<std::string> paths;
  for (int i = 0; i < 300; ++i) paths.push_back(fmt::format("/src/file{}", i));
  enqueue(paths);
  ASSERT_TRUE(scheduler_->write_line("READY"));
  ASSERT_TRUE(test::wait_until(
      [&] {
        return db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'") >= 5;
      },
      30s));
  ASSERT_TRUE(scheduler_->write_line("STOP"));
  EXPECT_EQ(scheduler_->wait_exit(30s), 0);
  const auto completed =
      db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'");
  const auto fresh =
      db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'NEW' AND attempts = 0");
  EXPECT_GT(fresh, 0);
  EXPECT_EQ(completed + fresh, 300) << "every item is either done or back to NEW";
  EXPECT_EQ(db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'DISPATCHED'"), 0);
  // Whatever ran was recorded as done exactly once.
  const auto r = runs();
  EXPECT_EQ(static_cast<std::int64_t>(r.size()), completed);
}

// An archiver answers a request once its group is durable, and works on the next one
// meanwhile: the consumer sends it a second request even when the first holds more bytes
// than the window's (files of 8 MiB here), so the archiver never idles through a sync.
TEST_F(SchedulerDrain, ASecondRequestIsSentWhileALargeOneAwaitsItsAnswer) {
  const std::string held = (dir_ / "held.log").string();
  start({"--archivers=1", "--archiver-arg=--record-held=" + held});
  enqueue({"/src/held-1", "/src/held-2", "/src/held-3", "/src/held-4"}, std::int64_t{8} << 20);
  drain();
  EXPECT_EQ(db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'"), 4);
  // Each held answer but the last was released by the next request's arrival.
  EXPECT_EQ(test::read_file(held), "1\n1\n1\n0\n");
}

TEST_F(SchedulerDrain, UnknownSignalsAreIgnoredAndResizeWorks) {
  start({"--archivers=1", "--batch-size=10"});
  ASSERT_TRUE(scheduler_->write_line("HELLO"));
  ASSERT_TRUE(scheduler_->write_line("ARCHIVERS lots"));
  ASSERT_TRUE(scheduler_->write_line("ARCHIVERS 3"));
  std::vector<std::string> paths;
  for (int i = 0; i < 200; ++i) paths.push_back(fmt::format("/src/f{}", i));
  enqueue(paths);
  drain();
  EXPECT_EQ(db_->count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'"), 200);
  ASSERT_TRUE(test::wait_until(
      [&] { return db_->count("SELECT archivers FROM timewarp.schedulers") == 3; }, 10s));
  ASSERT_TRUE(scheduler_->write_line("ARCHIVERS 1"));
  ASSERT_TRUE(test::wait_until(
      [&] { return db_->count("SELECT archivers FROM timewarp.schedulers") == 1; }, 10s));
  ASSERT_TRUE(scheduler_->write_line("STOP"));
  EXPECT_EQ(scheduler_->wait_exit(30s), 0);
}

}  // namespace
}  // namespace tw
