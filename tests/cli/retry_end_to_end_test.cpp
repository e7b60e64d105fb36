// `timewarp retry` with the real monitor, scheduler and archivers: an item that failed for
// good (a FIFO is not a file the archiver stores) is archived once the cause is gone (the
// FIFO replaced by a regular file) and it is requeued by hand.
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "integration/monitor_fixture.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::cli_json;
using test::run_cli;

TEST(RetryEndToEnd, FailedItemIsArchivedOnceTheCauseIsGoneAndItIsRetried) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const auto source = dir / "source";
  const auto archive = dir / "archive";
  std::filesystem::create_directories(source);
  const auto pipe = source / "queue.fifo";
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0644), 0);

  test::MonitorProcess monitor(db, {"--backup-root=" + archive.string(), "--archivers=1",
                                    "--max-attempts=5", "--retry-base-delay=0.05"});
  std::string out;
  ASSERT_EQ(run_cli(db, {"enqueue", pipe.string()}, &out), 0) << out;
  ASSERT_TRUE(test::wait_until(
      [&] { return db.count("SELECT count(*) FROM timewarp.items WHERE status = 'FAILED'") == 1; },
      60s))
      << db.scalar(
             "SELECT string_agg(status || ' ' || coalesce(last_error, ''), '; ') FROM "
             "timewarp.items");
  // Not a regular file: PERMANENT, so one attempt and no retry with backoff.
  const json failed = cli_json(db, {"failed", "--json"});
  ASSERT_EQ(failed.at("items").size(), 1u);
  const auto id = failed.at("items")[0].at("id").get<std::int64_t>();
  EXPECT_EQ(failed.at("items")[0].at("attempts"), 1);
  EXPECT_NE(failed.at("items")[0].at("error").get<std::string>().find("not a regular file"),
            std::string::npos)
      << failed.dump(2);
  EXPECT_EQ(cli_json(db, {"status", "--json"}).at("failures").at("last_hour"), 1);

  // The cause goes away; nothing happens until the item is retried.
  std::filesystem::remove(pipe);
  test::write_file(pipe, "now a regular file\n");
  ASSERT_EQ(run_cli(db, {"retry", std::to_string(id)}, &out), 0) << out;
  ASSERT_TRUE(test::wait_until(
      [&] {
        return db.scalar("SELECT status FROM timewarp.items WHERE id = " + std::to_string(id)) ==
               "COMPLETED";
      },
      60s))
      << db.scalar("SELECT status || ' ' || coalesce(last_error, '') FROM timewarp.items");
  EXPECT_GT(db.count("SELECT archive_bytes FROM timewarp.items WHERE id = " + std::to_string(id)),
            0);

  // The archive has the file's content now, and the history tells the story.
  ASSERT_EQ(test::run_command({test::cli_exe(), "--backup-root=" + archive.string(), "restore",
                               pipe.string(), "--to", (dir / "restored").string()},
                              &out),
            0)
      << out;
  EXPECT_EQ(test::read_file(dir / "restored"), "now a regular file\n");
  const json history = cli_json(db, {"history", "--json", pipe.string()});
  ASSERT_EQ(history.at("items").size(), 1u);
  EXPECT_EQ(history.at("items")[0].at("status"), "COMPLETED");
  EXPECT_EQ(history.at("items")[0].at("error").get<std::string>().rfind(
                "requeued by hand after 1 failed attempt: ", 0),
            0u)
      << history.dump(2);
  const json status = cli_json(db, {"status", "--json"});
  EXPECT_EQ(status.at("totals").at("failed"), 0);
  EXPECT_EQ(status.at("totals").at("completed"), 1);
  EXPECT_EQ(monitor.stop(), 0);
}

}  // namespace
}  // namespace tw
