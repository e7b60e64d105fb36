// A request that fails once and is retried runs after newer changes to the same paths: the
// real monitor, scheduler and archivers (behind timewarp-fault-archiver, which fails the
// chosen item once) and PostgreSQL. A retried MOVE or DELETE must reconcile the archive
// with the disk as it is when it runs, never replay the old edit (ARCHITECTURE.md,
// "Convergence"): once the queue has drained, restoring the source gives back the disk.
#include <gtest/gtest.h>

#include <filesystem>

#include "integration/monitor_harness.hpp"
#include "support/tree_snapshot.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class RetriedRequests : public ::testing::Test {
 protected:
  void SetUp() override { TW_REQUIRE_DATABASE(); }
  void TearDown() override {
    if (h_) {
      EXPECT_EQ(h_->stop(), 0);
    }
  }

  // Starts the monitor with archivers that fail, once, the item `op` whose path contains
  // `text`; the retry waits 2-4 s, time for newer changes to be archived first.
  void start(const std::string& op, const std::string& text) {
    h_ = std::make_unique<test::MonitorHarness>();
    const fs::path state = h_->dir() / "fault-state";
    fs::create_directories(state);
    h_->start({"--archivers=2", std::string("--archiver-exe=") + TW_FAULT_ARCHIVER_EXE,
               "--archiver-arg=--fault-real=" + test::archiver_exe(),
               "--archiver-arg=--fault-state=" + state.string(),
               "--archiver-arg=--fault-retry-match=" + op + ":" + text, "--retry-base-delay=4",
               "--retry-max-delay=4"});
    ASSERT_TRUE(h_->wait_catchup());
  }
  std::string p(const std::string& name) const { return h_->path(name); }

  ::testing::AssertionResult drained() { return h_->drained_for(600ms); }
  // Waits until the chosen item has failed once and waits for its retry.
  ::testing::AssertionResult failed_once(const std::string& op) {
    const bool ok = test::wait_until(
        [&] {
          return h_->db().count(fmt::format("SELECT count(*) FROM timewarp.items WHERE op = '{}' "
                                            "AND attempts = 1 AND status = 'NEW'",
                                            op)) == 1;
        },
        30s);
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "no " << op << " item failed once: "
                                         << h_->db().scalar(
                                                "SELECT string_agg(op || ' ' || path || ' ' || "
                                                "status, '; ' ORDER BY id) FROM timewarp.items");
  }
  std::string restore_differences() {
    const fs::path to = h_->dir() / "restored-tree";
    std::string out;
    const int status = test::run_command({test::cli_exe(), "--backup-root=" + h_->archive(),
                                          "restore", h_->src().string(), "--to", to.string()},
                                         &out);
    if (status != 0) return fmt::format("restore failed (exit {}): {}", status, out);
    return test::diff_trees(test::snapshot_tree(h_->src()), test::snapshot_tree(to));
  }
  // What is left to check once the retried item has run.
  void expect_converged() {
    ASSERT_TRUE(drained());
    EXPECT_EQ(h_->db().count("SELECT count(*) FROM timewarp.items WHERE attempts > 0 AND "
                             "status = 'COMPLETED'"),
              1)
        << "the chosen item did not run again";
    EXPECT_EQ(restore_differences(), "");
    EXPECT_EQ(h_->failures(), "");
  }

  std::unique_ptr<test::MonitorHarness> h_;
};

// mv a b; the MOVE fails; a new file takes the old name and b is changed; then the MOVE
// runs again. Replayed, it gave b the old name's newest content and deleted a.
TEST_F(RetriedRequests, AMoveRetriedAfterNewerChangesToBothNames) {
  start("MOVE", "moved-from");
  test::write_file(p("moved-from"), "the first file");
  ASSERT_TRUE(drained());
  fs::rename(p("moved-from"), p("moved-to"));
  ASSERT_TRUE(failed_once("MOVE"));
  test::write_file(p("moved-from"), "a new file under the old name");
  test::write_file(p("moved-to"), "the first file, changed after the rename");
  expect_converged();
}

// rm a; the DELETE fails; a is written again; then the DELETE runs again. Replayed, it
// tombstoned a file that exists.
TEST_F(RetriedRequests, ADeleteRetriedAfterTheFileCameBack) {
  start("DELETE", "comes-back");
  test::write_file(p("comes-back"), "first life");
  ASSERT_TRUE(drained());
  fs::remove(p("comes-back"));
  ASSERT_TRUE(failed_once("DELETE"));
  test::write_file(p("comes-back"), "second life");
  expect_converged();
}

// mv D E; the MOVE fails; E is removed; then the MOVE runs again. Replayed, it brought the
// deleted directory back under E.
TEST_F(RetriedRequests, AMoveRetriedAfterItsDestinationWasRemoved) {
  start("MOVE", "dir-D");
  test::write_file(p("dir-D/one"), "1");
  test::write_file(p("dir-D/sub/two"), "2");
  ASSERT_TRUE(drained());
  fs::rename(p("dir-D"), p("dir-E"));
  ASSERT_TRUE(failed_once("MOVE"));
  fs::remove_all(p("dir-E"));
  expect_converged();
}

}  // namespace
}  // namespace tw
