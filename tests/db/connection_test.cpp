#include "db/connection.hpp"

#include <gtest/gtest.h>

#include "db/migrations.hpp"
#include "support/test_support.hpp"

namespace tw::db {
namespace {

TEST(Connection, UnreachableServerNamesTheHostNeverThePassword) {
  try {
    Connection conn("host=127.0.0.1 port=1 dbname=x user=u password=hunter2 connect_timeout=5");
    FAIL() << "connected to port 1?";
  } catch (const BrokenConnection& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("host=127.0.0.1"), std::string::npos) << what;
    EXPECT_NE(what.find("port=1"), std::string::npos) << what;
    EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
  }
  try {
    Connection conn("postgresql://ann:hunter2@127.0.0.1:1/x?connect_timeout=5");
    FAIL() << "connected to port 1?";
  } catch (const BrokenConnection& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

TEST(Connection, SqlErrorsCarryTheirState) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  auto conn = db.connect();
  try {
    conn.exec("SELECT * FROM no_such_table");
    FAIL();
  } catch (const SqlError& e) {
    EXPECT_EQ(e.sqlstate(), "42P01");
    EXPECT_FALSE(e.retryable());
  }
  EXPECT_TRUE(conn.healthy());
}

TEST(Connection, ParametersCarryAnyText) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  auto conn = db.connect();
  const std::string tricky = "it's \"quoted\" \\ {braces}, commas; DROP TABLE x; --";
  auto r = conn.query("SELECT $1::text, $2::int, $3::text IS NULL", tricky, 42, nullptr);
  EXPECT_EQ(r.text(0, 0), tricky);
  EXPECT_EQ(r.int64(0, 1), 42);
  EXPECT_EQ(r.text(0, 2), "t");
  auto a = conn.query("SELECT (($1)::text[])[2], cardinality(($1)::text[])",
                      array_literal({std::string("a,b"), tricky, std::nullopt}));
  EXPECT_EQ(a.text(0, 0), tricky);
  EXPECT_EQ(a.int64(0, 1), 3);
}

TEST(Migrations, AreIdempotentAndVersioned) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;  // already migrated once
  auto conn = db.connect();
  EXPECT_TRUE(migrate(conn).empty());
  EXPECT_EQ(schema_version(conn), all_migrations().back().version);
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.queue_status"), 1);
}

TEST(Connection, NotificationsArrive) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  auto listener = db.connect();
  listener.listen("timewarp_items");
  auto writer = db.connect();
  writer.exec("INSERT INTO timewarp.items (op, path) VALUES ('UPDATE', '/x')");
  std::vector<Notification> got;
  ASSERT_TRUE(test::wait_until([&] {
    auto n = listener.consume_notifications();
    got.insert(got.end(), n.begin(), n.end());
    return !got.empty();
  }, std::chrono::seconds(5)));
  EXPECT_EQ(got[0].channel, "timewarp_items");
}

}  // namespace
}  // namespace tw::db
