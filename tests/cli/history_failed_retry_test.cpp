// `timewarp history PATH`, `timewarp failed` and `timewarp retry` on a real database.
#include <gtest/gtest.h>

#include "cli/cli_test_util.hpp"
#include "common/human.hpp"

namespace tw {
namespace {

using nlohmann::json;
using test::cli_json;
using test::run_cli;
using test::sql;

TEST(History, EveryItemOfThePathWithAttemptsAndErrorsOldestFirst) {
  TW_REQUIRE_DATABASE();
  test::TempDir dir;
  const std::string path = (dir / "notes.txt").string();
  test::TestDatabase db;
  sql(db,
      "INSERT INTO timewarp.items (op, path, status, attempts, last_error, finished_at, "
      "archive_bytes) VALUES "
      "('UPDATE', '" +
          path +
          "', 'COMPLETED', 0, NULL, now() - interval '1 hour', 120),"
          "('UPDATE', '/elsewhere', 'COMPLETED', 0, NULL, now(), 1),"
          "('UPDATE', '" +
          path +
          "', 'FAILED', 3, 'busy: file changed while read', now() - interval '5 minutes', NULL),"
          "('STAT', '" +
          path + "', 'NEW', 1, 'lease of scheduler 4 expired', NULL, NULL)");
  sql(db, "INSERT INTO timewarp.items (op, path, dest_path) VALUES ('MOVE', '/old/name', '" + path +
              "')");

  const json doc = cli_json(db, {"history", "--json", path});
  EXPECT_EQ(doc.at("path"), path);
  const auto& items = doc.at("items");
  ASSERT_EQ(items.size(), 4u) << doc.dump(2);
  EXPECT_EQ(items[0].at("status"), "COMPLETED");
  EXPECT_EQ(items[0].at("archive_bytes"), 120);
  EXPECT_TRUE(items[0].at("error").is_null());
  EXPECT_EQ(items[1].at("status"), "FAILED");
  EXPECT_EQ(items[1].at("attempts"), 3);
  EXPECT_EQ(items[1].at("error"), "busy: file changed while read");
  EXPECT_FALSE(items[1].at("finished_at").is_null());
  EXPECT_EQ(items[2].at("op"), "STAT");
  EXPECT_EQ(items[2].at("attempts"), 1);
  EXPECT_EQ(items[2].at("error"), "lease of scheduler 4 expired");
  EXPECT_EQ(items[3].at("op"), "MOVE");
  EXPECT_EQ(items[3].at("path"), "/old/name");
  EXPECT_EQ(items[3].at("dest_path"), path);
  for (std::size_t i = 1; i < items.size(); ++i)
    EXPECT_LT(items[i - 1].at("id"), items[i].at("id"));

  std::string out;
  ASSERT_EQ(run_cli(db, {"history", path}, &out), 0) << out;
  EXPECT_NE(out.find(path + ": 4 queue items\n"), std::string::npos) << out;
  EXPECT_NE(out.find("FAILED     UPDATE"), std::string::npos) << out;
  EXPECT_NE(out.find("3 attempts  " + path), std::string::npos) << out;
  EXPECT_NE(out.find("          busy: file changed while read\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/old/name -> " + path), std::string::npos) << out;
  EXPECT_NE(out.find("(120 bytes archived)"), std::string::npos) << out;
  // A header, and each time local to the second: when the item finished, else queued.
  EXPECT_NE(out.find("\nID        STATUS     OP     TIME"), std::string::npos) << out;
  for (const auto& item : items) {
    const std::string at =
        item.at(item.at("finished_at").is_null() ? "enqueued_at" : "finished_at");
    const auto ns = utc_text_ns(at);
    ASSERT_TRUE(ns) << at;
    EXPECT_NE(out.find(local_time_text(*ns)), std::string::npos) << at << "\n" << out;
  }

  // --limit keeps the newest.
  const json newest = cli_json(db, {"history", "--json", "--limit", "2", path});
  ASSERT_EQ(newest.at("items").size(), 2u);
  EXPECT_EQ(newest.at("items")[0].at("op"), "STAT");
  EXPECT_EQ(newest.at("items")[1].at("op"), "MOVE");
}

TEST(History, FindsOddNamesByTheirRawBytesAndSaysWhenThereIsNothing) {
  TW_REQUIRE_DATABASE();
  test::TempDir dir;
  test::TestDatabase db;
  const std::string odd = (dir / "tab\there%").string();
  std::string out;
  ASSERT_EQ(run_cli(db, {"enqueue", "--op", "DELETE", odd}, &out), 0) << out;
  const json doc = cli_json(db, {"history", "--json", odd});
  ASSERT_EQ(doc.at("items").size(), 1u) << doc.dump(2);
  EXPECT_EQ(doc.at("items")[0].at("path"), (dir / "tab%09here%25").string());

  ASSERT_EQ(run_cli(db, {"history", (dir / "never").string()}, &out), 0);
  EXPECT_NE(out.find("no queue items for "), std::string::npos) << out;
}

TEST(Failed, ListsFailedItemsNewestFirstWithErrors) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  sql(db,
      "INSERT INTO timewarp.items (op, path, status, attempts, last_error, finished_at) VALUES "
      "('UPDATE', '/a', 'FAILED', 5, 'first error', now() - interval '2 days'),"
      "('UPDATE', '/b', 'COMPLETED', 0, NULL, now()),"
      "('UPDATE', '/c', 'FAILED', 1, 'not a regular file, symlink or directory (fifo): /c', "
      "now())");
  const json doc = cli_json(db, {"failed", "--json"});
  const auto& items = doc.at("items");
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].at("path"), "/c");
  EXPECT_EQ(items[0].at("error"), "not a regular file, symlink or directory (fifo): /c");
  EXPECT_EQ(items[1].at("path"), "/a");
  EXPECT_EQ(items[1].at("attempts"), 5);

  std::string out;
  ASSERT_EQ(run_cli(db, {"failed"}, &out), 0);
  EXPECT_NE(out.find("          first error\n"), std::string::npos) << out;
  EXPECT_NE(out.find("2 failed items shown; requeue with: timewarp retry ID"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("/b"), std::string::npos) << out;

  EXPECT_EQ(cli_json(db, {"failed", "--json", "--limit", "1"}).at("items").size(), 1u);

  sql(db, "DELETE FROM timewarp.items WHERE status = 'FAILED'");
  ASSERT_EQ(run_cli(db, {"failed"}, &out), 0);
  EXPECT_EQ(out, "no failed items\n");
}

TEST(Retry, RequeuesFailedItemsByIdWithAFreshBudgetAndRefusesOthers) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  sql(db,
      "INSERT INTO timewarp.items (op, path, status, attempts, last_error, finished_at, "
      "not_before) VALUES "
      "('UPDATE', '/a', 'FAILED', 5, 'boom', now(), now() - interval '1 day'),"
      "('UPDATE', '/b', 'COMPLETED', 0, NULL, now(), now()),"
      "('UPDATE', '/c', 'FAILED', 1, 'bang', now(), now())");
  std::string out;
  ASSERT_EQ(run_cli(db, {"retry", "1"}, &out), 0) << out;
  EXPECT_EQ(out, "requeued 1 item\n");
  EXPECT_EQ(
      db.scalar(
          "SELECT status || ' ' || attempts || ' ' || (not_before <= now()) || ' ' || last_error "
          "FROM timewarp.items WHERE id = 1"),
      "NEW 0 true requeued by hand after 5 failed attempts: boom");
  EXPECT_EQ(cli_json(db, {"status", "--json"}).at("backlog").at("claimable"), 1);

  // A COMPLETED item and a missing one are named and left alone; the FAILED one goes.
  EXPECT_EQ(run_cli(db, {"retry", "2", "3", "99"}, &out), 1);
  EXPECT_EQ(out, "requeued 1 item\n");
  EXPECT_EQ(db.scalar("SELECT status FROM timewarp.items WHERE id = 2"), "COMPLETED");
  EXPECT_EQ(db.scalar("SELECT last_error FROM timewarp.items WHERE id = 3"),
            "requeued by hand after 1 failed attempt: bang");

  EXPECT_EQ(run_cli(db, {"retry"}, &out), 2);
  EXPECT_EQ(run_cli(db, {"retry", "--all-failed", "1"}, &out), 2);
}

TEST(Retry, AllFailedRequeuesEveryFailedItem) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::insert_items(db, 25, "f", "FAILED", ", last_error, finished_at", ", 'e' || g, now()");
  test::insert_items(db, 5, "c", "COMPLETED", ", finished_at", ", now()");
  std::string out;
  ASSERT_EQ(run_cli(db, {"retry", "--all-failed"}, &out), 0) << out;
  EXPECT_EQ(out, "requeued 25 failed items\n");
  const json doc = cli_json(db, {"status", "--json"});
  EXPECT_EQ(doc.at("backlog").at("claimable"), 25);
  EXPECT_EQ(doc.at("totals").at("failed"), 0);
  EXPECT_EQ(doc.at("totals").at("completed"), 5);
  ASSERT_EQ(run_cli(db, {"retry", "--all-failed"}, &out), 0);
  EXPECT_EQ(out, "requeued 0 failed items\n");
}

}  // namespace
}  // namespace tw
