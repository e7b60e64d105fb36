// Short sequences of file operations run back to back, inside one event window of the real
// monitor (with the real scheduler, archivers and database): once the queue has drained,
// `timewarp restore` of the whole source gives back exactly what is on disk - names, bytes,
// types, modes, owners and the mtimes of files and directories (ARCHITECTURE.md,
// "Convergence").
// Each test is one pattern the event batching or the watcher once got wrong.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "integration/monitor_harness.hpp"
#include "support/tree_snapshot.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Longer than the monitor's event window (the harness's event_delay, 0.05 s) and the pairing of a
// rename's halves, so that nothing seen is still on its way to the queue.
constexpr auto kQuiet = 600ms;

class MonitorSequences : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_REQUIRE_DATABASE();
    h_ = std::make_unique<test::MonitorHarness>();
    h_->start();
    ASSERT_TRUE(h_->wait_catchup());
  }
  void TearDown() override {
    if (h_) {
      EXPECT_EQ(h_->stop(), 0);
    }
  }

  std::string p(const std::string& name) const { return h_->path(name); }

  ::testing::AssertionResult drained() { return h_->drained_for(kQuiet); }

  // Restores the whole source into a fresh directory and compares it with the live tree:
  // every difference, one per line ("" when they are equal), or why the restore failed.
  std::string restore_differences() {
    const fs::path to = h_->dir() / fmt::format("restored-tree-{}", ++restores_);
    std::string out;
    const int status = test::run_command({test::cli_exe(), "--backup-root=" + h_->archive(),
                                          "restore", h_->src().string(), "--to", to.string()},
                                         &out);
    if (status != 0) return fmt::format("restore failed (exit {}): {}", status, out);
    return test::diff_trees(test::snapshot_tree(h_->src()), test::snapshot_tree(to));
  }

  // The queue's items after `after_id`, for a failure message.
  std::string items_after(std::int64_t after_id) const {
    return h_->db().scalar(fmt::format(
        "SELECT coalesce(string_agg(op || ' ' || path || coalesce(' > ' || dest_path, '') || ' ' "
        "|| status, '; ' ORDER BY id), '') FROM timewarp.items WHERE id > {}",
        after_id));
  }
  std::int64_t last_id() const {
    return h_->db().count("SELECT coalesce(max(id), 0) FROM timewarp.items");
  }

  // Sets up the starting tree (through the running monitor) and lets it drain.
  void given(const std::function<void()>& setup) {
    setup();
    ASSERT_TRUE(drained());
    start_id_ = last_id();
  }
  // Runs the sequence, waits for the queue to drain, and expects the restored tree to be
  // the live one.
  void expect_converges_after(const std::function<void()>& sequence) {
    sequence();
    ASSERT_TRUE(drained());
    EXPECT_EQ(restore_differences(), "") << "queued: " << items_after(start_id_);
    EXPECT_EQ(h_->failures(), "");
  }

  std::unique_ptr<test::MonitorHarness> h_;
  std::int64_t start_id_ = 0;
  int restores_ = 0;
};

// Log rotation: the old name is renamed away, a new file takes its name, and the rotated
// file is removed - all before the monitor queues anything.
TEST_F(MonitorSequences, LogRotatedAndTheRotatedFileRemoved) {
  given([&] { test::write_file(p("log"), "old lines\n"); });
  expect_converges_after([&] {
    fs::rename(p("log"), p("log.1"));
    test::write_file(p("log"), "new\n");
    fs::remove(p("log.1"));
  });
}

TEST_F(MonitorSequences, FileRenamedTwice) {
  given([&] { test::write_file(p("a"), "content of a"); });
  expect_converges_after([&] {
    fs::rename(p("a"), p("b"));
    fs::rename(p("b"), p("c"));
  });
}

TEST_F(MonitorSequences, DirectoryRenamedThenAFileMovedOutOfIt) {
  given([&] {
    test::write_file(p("A/f1"), "one");
    test::write_file(p("A/f2"), "two");
  });
  expect_converges_after([&] {
    fs::rename(p("A"), p("B"));
    fs::rename(p("B/f1"), p("g1"));
  });
}

TEST_F(MonitorSequences, FileRemovedThenItsDirectoryRenamed) {
  given([&] {
    test::write_file(p("C/f1"), "one");
    test::write_file(p("C/f2"), "two");
  });
  expect_converges_after([&] {
    fs::remove(p("C/f1"));
    fs::rename(p("C"), p("E"));
  });
}

TEST_F(MonitorSequences, DirectoryRemovedAndMadeAgainWithOtherContent) {
  given([&] { test::write_file(p("D/old"), "old"); });
  expect_converges_after([&] {
    fs::remove_all(p("D"));
    fs::create_directory(p("D"));
    test::write_file(p("D/new"), "x");
  });
}

TEST_F(MonitorSequences, DirectoryReplacedByAFile) {
  given([&] {
    test::write_file(p("F/x"), "x");
    test::write_file(p("F/sub/y"), "y");
  });
  expect_converges_after([&] {
    fs::remove_all(p("F"));
    test::write_file(p("F"), "x");
  });
}

// truncate(2) on the path: a write with no open and no close.
TEST_F(MonitorSequences, FileTruncatedByItsPath) {
  given([&] { test::write_file(p("data"), "0123456789abcdef"); });
  expect_converges_after([&] { ASSERT_EQ(::truncate(p("data").c_str(), 5), 0); });
}

// A writer that keeps its file open: what it wrote is archived once it pauses.
TEST_F(MonitorSequences, FileWrittenAndKeptOpen) {
  given([&] { test::write_file(p("service.log"), "started\n"); });
  const int fd = ::open(p("service.log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  expect_converges_after([&] { ASSERT_EQ(::write(fd, "request 1\n", 10), 10); });
  ::close(fd);
}

// Every entry created, removed or renamed changes its directory's mtime; the restored
// directories (the source root among them) carry the live mtimes.
TEST_F(MonitorSequences, DirectoryMtimesFollowTheirEntries) {
  given([&] {
    test::write_file(p("d1/keep"), "k");
    test::write_file(p("d1/gone"), "g");
    test::write_file(p("d1/renamed"), "r");
    test::write_file(p("d1/leaves"), "l");
    fs::create_directories(p("d2/empty"));
    test::write_file(p("top"), "t");
  });
  expect_converges_after([&] {
    test::write_file(p("d1/added"), "a");                    // d1: entry added
    fs::remove(p("d1/gone"));                                // d1: entry removed
    fs::rename(p("d1/renamed"), p("d1/renamed.new"));        // d1: renamed within
    fs::rename(p("d1/leaves"), p("d2/arrived"));             // d1 and d2
    ASSERT_EQ(::mkdir(p("d2/empty/sub").c_str(), 0750), 0);  // d2/empty
    fs::remove(p("top"));                                    // the source root
  });
}

// A file and a directory dated before 1970, with a fraction of a second: archived and
// restored to the nanosecond (futimens wants tv_nsec in [0, 1e9), so the conversion
// floors instead of truncating).
TEST_F(MonitorSequences, MtimesBefore1970WithAFraction) {
  given([&] { test::write_file(p("old/file"), "from 1969"); });
  expect_converges_after([&] {
    const struct timespec file_times[2] = {{-3, 250'000'000}, {-3, 250'000'000}};
    ASSERT_EQ(::utimensat(AT_FDCWD, p("old/file").c_str(), file_times, 0), 0);
    const struct timespec dir_times[2] = {{-86'400, 1}, {-86'400, 1}};
    ASSERT_EQ(::utimensat(AT_FDCWD, p("old").c_str(), dir_times, 0), 0);
  });
}

// Restore by time after a rename: the new name begins to exist at the rename. Restoring
// the folder as it was before shows the old name only, and the new name alone "did not
// exist" then; `versions` of the new name says where it came from.
TEST_F(MonitorSequences, RestoreByTimeBeforeARenameShowsTheOldNameOnly) {
  given([&] {
    test::write_file(p("dir/a"), "version one");
    test::write_file(p("notes"), "n");
  });
  const auto snapshot = test::snapshot_tree(h_->src());
  const auto at = std::chrono::system_clock::now().time_since_epoch();
  const std::string at_text = fmt::format(
      "@{:.9f}", std::chrono::duration_cast<std::chrono::nanoseconds>(at).count() / 1e9);
  expect_converges_after([&] { fs::rename(p("dir/a"), p("dir/b")); });

  const fs::path to = h_->dir() / "restored-at";
  std::string out;
  ASSERT_EQ(test::run_command({test::cli_exe(), "--backup-root=" + h_->archive(), "restore",
                               h_->src().string(), "--at", at_text, "--to", to.string()},
                              &out),
            0)
      << out;
  EXPECT_EQ(test::diff_trees(snapshot, test::snapshot_tree(to)), "");
  EXPECT_NE(test::run_command({test::cli_exe(), "--backup-root=" + h_->archive(), "restore",
                               p("dir/b"), "--at", at_text, "--to", (h_->dir() / "b-at").string()},
                              &out),
            0)
      << "dir/b did not exist before the rename";
  const auto versions = h_->versions(p("dir/b"));
  ASSERT_FALSE(versions.empty());
  EXPECT_EQ(versions.front().op, "MOVE");
  EXPECT_NE(versions.front().extra.find("from="), std::string::npos) << versions.front().extra;
}

}  // namespace
}  // namespace tw
