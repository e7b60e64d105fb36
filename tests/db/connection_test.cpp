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

// Connection strings libpq cannot read, or reads otherwise than meant, each with the
// password it holds. libpq quotes what it could not read in its message.
const std::vector<std::pair<std::string, std::string>> kMalformed = {
    {"postgresql://u:s3c%ZZretpw@127.0.0.1:1/d", "s3c%ZZretpw"},
    {"postgresql://u:Pw4tr1cky@[::1/d", "Pw4tr1cky"},
    {"postgres://u:tr%4ckyPw@127.0.0.1:1/d?connect_timeout=5", "tr%4ckyPw"},
    {"postgresql://u:uNenc@Qx9%pw@127.0.0.1:1/d", "uNenc@Qx9%pw"},
    {"postgresql://u:at@sign@127.0.0.1:1/d?connect_timeout=5", "at@sign"},
    {"postgresql://127.0.0.1:1/d?password=qu3rypw&bogus_option=1", "qu3rypw"},
    {"postgresql://u:sp ace pw@127.0.0.1:1/d", "sp ace pw"},
    {"host=127.0.0.1 port=1 password='unt3rm s3cret", "unt3rm s3cret"},
    {"host=127.0.0.1 port=1 password=kv5ecret bogus_option=1", "kv5ecret"},
    {"host=127.0.0.1 port=1 password = two w0rds connect_timeout=5", "w0rds"},
    {"host=127.0.0.1 port=1 password='quo\\'ted pw' bogus", "quo'ted pw"},
    {"host=127.0.0.1 port=nope password=Sp4rePw", "Sp4rePw"},
};

// Every piece of `password` a reader could take for it: the whole, and its words and the
// parts between '@' and '%' (a message must show none of them).
std::vector<std::string> pieces(const std::string& password) {
  std::vector<std::string> out = {password};
  std::string piece;
  for (char c : password + " ") {
    if (c == ' ' || c == '@' || c == '%' || c == '\'') {
      if (piece.size() >= 3) out.push_back(piece);
      piece.clear();
    } else {
      piece.push_back(c);
    }
  }
  return out;
}

TEST(Connection, MalformedConnectionStringsNeverShowTheirPassword) {
  for (const auto& [conninfo, password] : kMalformed) {
    try {
      Connection conn(conninfo);
      ADD_FAILURE() << "connected with " << conninfo;
    } catch (const BrokenConnection& e) {
      const std::string what = e.what();
      for (const auto& piece : pieces(password)) {
        EXPECT_EQ(what.find(piece), std::string::npos) << "'" << piece << "' in: " << what;
      }
      EXPECT_NE(what.find("cannot connect to database"), std::string::npos) << what;
    }
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
