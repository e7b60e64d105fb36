// Changes made while the monitor was stopped are found at its next start, by a scan
// against what the archive holds; only those are queued.
#include <sqlite3.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "integration/monitor_harness.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class MonitorCatchUp : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_REQUIRE_DATABASE();
    h_ = std::make_unique<test::MonitorHarness>();
  }
  // Items queued after `after_id`, as "OP path" relative to the source.
  std::set<std::string> queued_after(std::int64_t after_id) {
    auto conn = h_->db().connect();
    auto r = conn.query("SELECT op, path FROM timewarp.items WHERE id > $1", after_id);
    std::set<std::string> out;
    const std::string prefix = escape_bytes(h_->src().string());
    for (int i = 0; i < r.rows(); ++i) {
      std::string path(r.text(i, 1));
      path = path == prefix ? "." : path.substr(prefix.size() + 1);
      out.insert(std::string(r.text(i, 0)) + " " + path);
    }
    return out;
  }
  std::int64_t last_id() {
    return h_->db().count("SELECT coalesce(max(id), 0) FROM timewarp.items");
  }
  ::testing::AssertionResult drained() {
    if (test::wait_until([&] { return h_->open_items() == 0; }, 60s))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << h_->open_items() << " items still open";
  }

  // Files f0..f<count-1> archived by a first run of the monitor; then, with no monitor
  // running, an UPDATE of `name` queued by hand.
  void archive_then_enqueue_while_stopped(int count, const std::string& name) {
    for (int i = 0; i < count; ++i) test::write_file(h_->path(fmt::format("f{}", i)), "x");
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  ASSERT_TRUE(drained());
  EXPECT_EQ(h_->stop(), 0);
    std::string out;
    ASSERT_EQ(test::run_command(
                  {test::cli_exe(), "--database=" + h_->db().conninfo(), "enqueue", h_->path(name)},
                  &out),
              0)
        << out;
  }

  std::unique_ptr<test::MonitorHarness> h_;
};

TEST_F(MonitorCatchUp, FirstStartQueuesTheWholeTree) {
  test::write_file(h_->path("a"), "1");
  test::write_file(h_->path("d/b"), "2");
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  // Each directory with its entries, as one SCAN.
  EXPECT_EQ(queued_after(0), (std::set<std::string>{"SCAN .", "SCAN d"}));
  // What an operator sees of the monitor.
  EXPECT_EQ(h_->db().scalar(fmt::format(
                "SELECT watches || ' ' || unwatched_dirs || ' ' || items_queued || ' ' || "
                "(scheduler_pid IS NOT NULL) FROM timewarp.monitors WHERE pid = {}",
                h_->pid())),
            "2 0 2 true");
  ASSERT_TRUE(drained());
  EXPECT_EQ(h_->restore(h_->path("d/b")), "2");
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorCatchUp, AnUnchangedTreeQueuesNothing) {
  for (int i = 0; i < 50; ++i) test::write_file(h_->path(fmt::format("d{}/f{}", i % 5, i)), "x");
  fs::create_directory_symlink("d0", h_->path("link"));
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  ASSERT_TRUE(drained());
  EXPECT_EQ(h_->stop(), 0);
  const auto before = last_id();
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  EXPECT_EQ(queued_after(before), std::set<std::string>{});
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorCatchUp, ExactlyTheFilesChangedWhileStoppedGetNewVersions) {
  for (const auto* name : {"same", "edited", "chmodded", "deleted", "dir/gone/x", "dir/kept"}) {
    test::write_file(h_->path(name), std::string("old ") + name);
  }
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  ASSERT_TRUE(drained());
  EXPECT_EQ(h_->stop(), 0);

  test::write_file(h_->path("edited"), "new content, longer");
  ASSERT_EQ(::chmod(h_->path("chmodded").c_str(), 0600), 0);
  fs::remove(h_->path("deleted"));
  fs::remove_all(h_->path("dir/gone"));
  test::write_file(h_->path("created"), "brand new");
  test::write_file(h_->path("newdir/inner"), "inner");

  const auto before = last_id();
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  // (The source directory and dir lost or gained entries: their mtimes changed.) Three of
  // the source directory's four files differ, and newdir's only one: each goes as a SCAN
  // of its directory, which looks at every entry and reads only what differs.
  EXPECT_EQ(queued_after(before), (std::set<std::string>{"SCAN .", "SCAN newdir", "DELETE deleted",
                                                         "DELETE dir/gone", "STAT dir"}));
  ASSERT_TRUE(drained());
  EXPECT_EQ(h_->ops(h_->path("same")), "UPDATE");
  EXPECT_EQ(h_->ops(h_->path("dir/kept")), "UPDATE");
  EXPECT_EQ(h_->ops(h_->path("edited")), "UPDATE UPDATE");
  EXPECT_EQ(h_->restore(h_->path("edited")), "new content, longer");
  EXPECT_EQ(h_->restore(h_->path("edited"), 1), "old edited");
  EXPECT_EQ(h_->ops(h_->path("chmodded")), "UPDATE STAT");
  EXPECT_EQ(h_->ops(h_->path("deleted")), "UPDATE DELETE");
  EXPECT_EQ(h_->ops(h_->path("dir/gone/x")), "UPDATE DELETE");
  EXPECT_EQ(h_->restore(h_->path("created")), "brand new");
  EXPECT_EQ(h_->restore(h_->path("newdir/inner")), "inner");
  EXPECT_EQ(h_->failures(), "");
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorCatchUp, WorkStillQueuedAtStopIsNotQueuedAgain) {
  // Queued by hand while no monitor runs, then changed: the waiting UPDATE covers it.
  ASSERT_NO_FATAL_FAILURE(archive_then_enqueue_while_stopped(20, "f3"));
  // Not due for a while, so that it is still waiting when the catch-up looks: the scheduler
  // starts beside the catch-up and would otherwise take it at once (the catch-up queues a
  // path again whose item it finds in flight, as the next test shows).
  const auto before = last_id();
  h_->db().connect().query(
      "UPDATE timewarp.items SET not_before = now() + interval '3 seconds' WHERE id = $1", before);
  test::write_file(h_->path("f3"), "changed");
  test::write_file(h_->path("f4"), "changed");
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  EXPECT_EQ(queued_after(before), std::set<std::string>{"UPDATE f4"});
  ASSERT_TRUE(drained());
  EXPECT_EQ(h_->restore(h_->path("f3")), "changed");
  EXPECT_EQ(h_->stop(), 0);
}

// An item already dispatched may have been looked at before the change that followed
// it: it covers nothing, so the catch-up queues the change again (a second look at a file
// that did not change costs a look, a change not queued is lost).
TEST_F(MonitorCatchUp, WorkAlreadyDispatchedIsQueuedAgain) {
  // An UPDATE of f3 that an archiver holds (its lease runs for an hour), then f3 changes.
  ASSERT_NO_FATAL_FAILURE(archive_then_enqueue_while_stopped(5, "f3"));
  const auto held = last_id();
  h_->db().connect().query(
      "UPDATE timewarp.items SET status = 'DISPATCHED', dispatched_at = now(), "
      "lease_until = now() + interval '1 hour' WHERE id = $1",
      held);
  test::write_file(h_->path("f3"), "changed");
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  EXPECT_EQ(queued_after(held), std::set<std::string>{"UPDATE f3"});
  ASSERT_TRUE(test::wait_until(
      [&] {
        return h_->db().count(fmt::format(
                   "SELECT count(*) FROM timewarp.items WHERE id > {} AND status = 'COMPLETED'",
                   held)) == 1;
      },
      60s));
  EXPECT_EQ(h_->restore(h_->path("f3")), "changed");
  h_->db().connect().query("UPDATE timewarp.items SET status = 'COMPLETED' WHERE id = $1", held);
  EXPECT_EQ(h_->stop(), 0);
}

// Removes `path`'s history from the archive by hand: format 1's history file, or format
// 2's rows in the catalog.
void forget_history(const std::string& archive, const std::string& path) {
  if (fs::exists(fs::path(archive) / "nodes")) {
    std::string history;
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(archive) / "nodes")) {
      if (entry.path().extension() == ".history" &&
          test::read_file(entry.path()).find("path\t" + escape_bytes(path) + "\n") !=
              std::string::npos) {
        history = entry.path().string();
      }
    }
    ASSERT_FALSE(history.empty());
    fs::remove(history);
    return;
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((archive + "/catalog.db").c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  // The catalog's tree is (parent, name) rows from the root (the row with no parent):
  // `path`'s node is found one component at a time.
  sqlite3_stmt* step = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT id FROM nodes WHERE parent IS ?1 AND name = ?2", -1,
                               &step, nullptr),
            SQLITE_OK);
  sqlite3_int64 node = 0;
  bool root = true;
  std::string rest = path;  // "/a/b": "", "a", "b"
  for (;;) {
    const auto slash = rest.find('/');
    const std::string name = root ? std::string() : rest.substr(0, slash);
    sqlite3_reset(step);
    if (root) {
      sqlite3_bind_null(step, 1);
    } else {
      sqlite3_bind_int64(step, 1, node);
    }
    sqlite3_bind_blob(step, 2, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(step), SQLITE_ROW) << "no node for " << name;
    node = sqlite3_column_int64(step, 0);
    if (!root && slash == std::string::npos) break;
    rest = root ? rest.substr(1) : rest.substr(slash + 1);
    root = false;
  }
  sqlite3_finalize(step);
  sqlite3_stmt* statement = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "DELETE FROM versions WHERE node = ?1", -1, &statement, nullptr),
            SQLITE_OK);
  sqlite3_bind_int64(statement, 1, node);
  EXPECT_EQ(sqlite3_step(statement), SQLITE_DONE);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_finalize(statement);
  sqlite3_close(db);
}

// What the archive lost while the monitor runs (here a history removed by hand, as a
// restore of the archive from an older copy would) is found by the periodic rescan,
// queued at the rescan's lower priority, and counted in timewarp.monitors.
TEST_F(MonitorCatchUp, APeriodicRescanRepairsWhatTheArchiveLost) {
  h_->start({"--archivers=2", "--rescan-interval=1"});
  ASSERT_TRUE(h_->wait_catchup());
  const auto f = h_->path("f");
  test::write_file(f, "content");
  ASSERT_TRUE(h_->wait_done("UPDATE", f));
  forget_history(h_->archive(), f);
  ASSERT_TRUE(test::wait_until(
      [&] {
        return h_->db().count(fmt::format(
                   "SELECT count(*) FROM timewarp.items WHERE op = 'UPDATE' AND path = '{}' AND "
                   "priority < 0 AND status = 'COMPLETED'",
                   escape_bytes(f))) == 1;
      },
      30s));
  EXPECT_EQ(h_->restore(f), "content");
  EXPECT_GE(h_->db().count(
                fmt::format("SELECT rescans FROM timewarp.monitors WHERE pid = {}", h_->pid())),
            1);
  EXPECT_EQ(h_->stop(), 0);
}

}  // namespace
}  // namespace tw
