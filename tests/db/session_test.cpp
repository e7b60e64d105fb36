// db::Session against the real server: which errors drop the connection, which keep it,
// how the delays grow, and what the session reports for `timewarp status`.
#include "db/session.hpp"

#include <gtest/gtest.h>

#include <thread>

#include <fmt/format.h>

#include "support/test_support.hpp"

namespace tw::db {
namespace {

using namespace std::chrono_literals;

Session::Options options_for(const test::TestDatabase& db) {
  return {.conninfo = db.conninfo(),
          .who = "test",
          .first_delay = 20ms,
          .max_delay = 200ms,
          .on_connect = nullptr,
          .log_failures = true};
}

std::int64_t backend_pid(Session& session) {
  return *session.run("pid", [](Connection& c) { return c.query("SELECT pg_backend_pid()").int64(0, 0); });
}

TEST(Backoff, GrowsWithJitterUpToTheCapAndNeverShrinksBeforeIt) {
  Backoff backoff(100ms, 1600ms);
  std::chrono::milliseconds last{0};
  for (int step = 0; step < 5; ++step) {  // 100, 200, 400, 800, 1600
    const auto wait = backoff.next();
    const auto full = 100ms * (1 << step);
    EXPECT_GE(wait, full / 2) << "step " << step;
    EXPECT_LE(wait, full) << "step " << step;
    EXPECT_GE(wait, last) << "step " << step;
    last = wait;
  }
  for (int step = 0; step < 20; ++step) EXPECT_LE(backoff.next(), 1600ms);
  backoff.reset();
  EXPECT_LE(backoff.next(), 100ms);
}

TEST(Session, ARefusedStatementKeepsTheConnectionAndDelaysOnlyItsOperation) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  Session session(options_for(db));
  const auto pid = backend_pid(session);
  EXPECT_FALSE(session.run("divide", [](Connection& c) { c.query("SELECT 1/0"); }));
  ASSERT_TRUE(session.last_failure());
  EXPECT_EQ(session.last_failure()->kind, ErrorKind::Statement);
  EXPECT_EQ(session.last_failure()->sqlstate, "22012");
  EXPECT_EQ(session.health().statement_errors, 1);
  EXPECT_NE(session.health().failing.find("divide"), std::string::npos) << session.health().failing;
  // The failed operation waits; another runs at once, on the same connection.
  EXPECT_GT(session.wait("divide"), 0ms);
  EXPECT_FALSE(session.run("divide", [](Connection&) { ADD_FAILURE() << "ran during its delay"; }));
  EXPECT_EQ(backend_pid(session), pid);
  // Once the delay is over it runs again, and a success clears the failure.
  ASSERT_TRUE(test::wait_until([&] { return session.wait("divide") == 0ms; }, 5s));
  EXPECT_TRUE(session.run("divide", [](Connection& c) { c.query("SELECT 1/1"); }));
  EXPECT_TRUE(session.health().failing.empty());
  EXPECT_EQ(session.health().statement_errors, 1);
  EXPECT_FALSE(session.last_failure());
}

TEST(Session, ARetryableServerStateIsNotCountedAsAnError) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  Session session(options_for(db));
  const auto pid = backend_pid(session);
  for (const char* state : {"40001", "40P01", "53300", "55P03"}) {
    EXPECT_FALSE(session.run(state, [&](Connection& c) {
      c.exec(fmt::format("DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '{}'; END $$",
                         state));
    }));
    ASSERT_TRUE(session.last_failure());
    EXPECT_EQ(session.last_failure()->kind, ErrorKind::Retryable) << state;
  }
  EXPECT_EQ(session.health().statement_errors, 0);
  EXPECT_TRUE(session.health().failing.empty());
  EXPECT_EQ(backend_pid(session), pid);
}

TEST(Session, ABrokenConnectionIsDroppedAndMadeAgainWithItsSetUp) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  int connects = 0;
  auto options = options_for(db);
  options.on_connect = [&](Connection& c) {
    ++connects;
    c.listen("test_channel");
  };
  Session session(options);
  const auto pid = backend_pid(session);
  EXPECT_EQ(connects, 1);
  db.connect().query("SELECT pg_terminate_backend($1)", pid);
  EXPECT_FALSE(session.run("after the cut", [](Connection& c) { c.query("SELECT 1"); }));
  ASSERT_TRUE(session.last_failure());
  EXPECT_EQ(session.last_failure()->kind, ErrorKind::Outage);
  EXPECT_FALSE(session.connected());
  EXPECT_EQ(session.health().statement_errors, 0);
  // The next attempt after the delay connects again and redoes the set-up.
  std::int64_t again = 0;
  ASSERT_TRUE(test::wait_until([&] {
    const auto p = session.run("pid", [](Connection& c) {
      return c.query("SELECT pg_backend_pid()").int64(0, 0);
    });
    if (p) again = *p;
    return p.has_value();
  }, 10s));
  EXPECT_NE(again, pid);
  EXPECT_EQ(connects, 2);
  auto listening = session.run("listening", [](Connection& c) {
    return c.query("SELECT count(*) FROM pg_listening_channels() WHERE pg_listening_channels = "
                   "'test_channel'").int64(0, 0);
  });
  ASSERT_TRUE(listening);
  EXPECT_EQ(*listening, 1);
}

TEST(Session, AnUnreachableServerIsTriedAgainOnlyAfterTheDelay) {
  Session session({.conninfo = "host=127.0.0.1 port=1 dbname=x connect_timeout=5",
                   .who = "test",
                   .first_delay = 200ms,
                   .max_delay = 400ms,
                   .on_connect = nullptr,
                   .log_failures = false});
  EXPECT_FALSE(session.run("x", [](Connection&) {}));
  ASSERT_TRUE(session.last_failure());
  EXPECT_EQ(session.last_failure()->kind, ErrorKind::Outage);
  EXPECT_NE(session.last_failure()->message.find("port=1"), std::string::npos);
  EXPECT_GT(session.wait(), 0ms);
  EXPECT_THROW(session.connect_now(), BrokenConnection);
}

}  // namespace
}  // namespace tw::db
