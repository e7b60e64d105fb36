// A statement the server refuses again and again while a drain runs (a constraint the test
// adds, as a bug or a bad value would): the scheduler logs it as an error naming the
// statement, once per attempt, with a growing delay between attempts; `timewarp status`
// shows it; the rest of the scheduler's work (its heartbeat) goes on; nothing is lost; and
// the drain finishes once the cause is removed. (A broken connection, retried as before:
// SchedulerFaults.ConnectionsCutMidDrainLoseNothingAndMarkNothingTwice.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

#include "integration/scheduler_fixture.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

struct Refusal {
  const char* name;
  const char* check;      // the constraint on timewarp.items that refuses the statement
  const char* operation;  // the operation the scheduler names in its log
  const char* statement;  // how the refused statement begins
};

class RefusedStatement : public ::testing::TestWithParam<Refusal> {};

// Milliseconds since midnight of each log line (local time) that contains `needle`.
std::vector<std::int64_t> line_times(const std::string& log, const std::string& needle) {
  static const std::regex kTime(R"(^\d{4}-\d\d-\d\dT(\d\d):(\d\d):(\d\d)\.(\d{3}) )");
  std::vector<std::int64_t> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.find(needle) == std::string::npos || !std::regex_search(line, m, kTime)) continue;
    std::int64_t ms = ((std::stoll(m[1]) * 60 + std::stoll(m[2])) * 60 + std::stoll(m[3])) * 1000 +
                      std::stoll(m[4]);
    if (!out.empty() && ms < out.back()) ms += 24 * 3600 * 1000;  // past midnight
    out.push_back(ms);
  }
  return out;
}

nlohmann::json status_json(const test::TestDatabase& db) {
  std::string out;
  const int code =
      test::run_command({test::cli_exe(), "--database=" + db.conninfo(), "status", "--json"}, &out);
  EXPECT_EQ(code, 0) << out;
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception&) {
    ADD_FAILURE() << out;
    return nlohmann::json::object();
  }
}

TEST_P(RefusedStatement, BacksOffShowsInStatusLosesNothingAndFinishesOnceRemoved) {
  TW_REQUIRE_DATABASE();
  const Refusal& refusal = GetParam();
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  f.fill(300);
  const std::string log = (f.dir() / "scheduler.log").string();
  db.connect().exec(fmt::format(
      "ALTER TABLE timewarp.items ADD CONSTRAINT test_refusal CHECK ({}) NOT VALID",
      refusal.check));
  auto scheduler = f.start({"--archivers=2", "--batch-size=50", "--log-file=" + log});
  ASSERT_TRUE(scheduler->write_line("READY"));

  const std::string failed = fmt::format("{} failed", refusal.operation);
  ASSERT_TRUE(test::wait_until([&] { return line_times(test::read_file(log), failed).size() >= 5; },
                               60s))
      << test::read_file(log);
  const std::string text = test::read_file(log);
  EXPECT_NE(text.find(fmt::format("statement: {}", refusal.statement)), std::string::npos) << text;
  EXPECT_NE(text.find("test_refusal"), std::string::npos) << text;
  EXPECT_NE(text.find("SQLSTATE 23514"), std::string::npos) << text;
  // One line per attempt, the delay growing: with jitter each wait is in [d/2, d] for
  // d = 0.1, 0.2, 0.4, 0.8 s..., so the fourth wait is at least twice the first.
  const auto times = line_times(text, failed);
  ASSERT_GE(times.size(), 5u);
  const auto first_wait = times[1] - times[0];
  const auto fourth_wait = times[4] - times[3];
  EXPECT_GE(fourth_wait, 2 * first_wait) << text;
  EXPECT_GE(fourth_wait, 300) << text;

  // The heartbeat goes on and carries the error to `timewarp status`.
  nlohmann::json doc;
  ASSERT_TRUE(test::wait_until([&] {
    doc = status_json(db);
    return doc.contains("database_errors") && doc["database_errors"].size() == 1;
  }, 30s)) << doc.dump(2);
  const auto& error = doc["database_errors"][0];
  EXPECT_EQ(error["process"], "scheduler");
  EXPECT_GE(error["errors"].get<std::int64_t>(), 1);
  EXPECT_NE(error["error"].get<std::string>().find("test_refusal"), std::string::npos)
      << error.dump();
  std::string shown;
  ASSERT_EQ(test::run_command({test::cli_exe(), "--database=" + db.conninfo(), "status"}, &shown),
            0);
  EXPECT_NE(shown.find("db errors"), std::string::npos) << shown;
  EXPECT_NE(shown.find("test_refusal"), std::string::npos) << shown;
  EXPECT_EQ(f.count("status = 'COMPLETED'"), 0);

  // The cause removed, the drain finishes: every item done once, none failed.
  db.connect().exec("ALTER TABLE timewarp.items DROP CONSTRAINT test_refusal");
  std::string line;
  ASSERT_EQ(scheduler->read_line(line, 120s), ChildProcess::ReadStatus::Line)
      << test::read_file(log);
  EXPECT_EQ(line, "READY");
  EXPECT_EQ(f.count("status = 'COMPLETED'"), 300);
  EXPECT_EQ(f.count("status = 'FAILED'"), 0);
  EXPECT_EQ(f.runs().size(), 300u);
  EXPECT_NE(test::read_file(log).find(fmt::format("{} succeeded again", refusal.operation)),
            std::string::npos);
  // And the status no longer shows an error once the next heartbeat has told it.
  ASSERT_TRUE(test::wait_until([&] { return status_json(db)["database_errors"].empty(); }, 30s));
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

INSTANTIATE_TEST_SUITE_P(
    DatabaseErrors, RefusedStatement,
    ::testing::Values(
        // The reporter thread: every completion refused.
        Refusal{"Completion", "status <> 'COMPLETED'", "writing results", "UPDATE timewarp.items"},
        // The scheduler's main thread: every claim refused.
        Refusal{"Claim", "status <> 'DISPATCHED'", "claiming a batch", "WITH batch AS"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace tw
