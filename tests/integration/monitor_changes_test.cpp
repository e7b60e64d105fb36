// File changes seen by the real monitor end up as versions in the archive: the real
// monitor, scheduler, archivers and database, checked with `timewarp versions` and
// `timewarp restore` as an operator would.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

#include "integration/monitor_harness.hpp"

namespace tw {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class MonitorChanges : public ::testing::Test {
 protected:
  void SetUp() override {
    TW_REQUIRE_DATABASE();
    h_ = std::make_unique<test::MonitorHarness>();
  }
  std::unique_ptr<test::MonitorHarness> h_;
};

TEST_F(MonitorChanges, CreateModifyChmodDeleteAreEachOneVersion) {
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  const auto f = h_->path("notes.txt");

  test::write_file(f, "first draft");
  ASSERT_TRUE(h_->wait_done("UPDATE", f));
  EXPECT_EQ(h_->ops(f), "UPDATE");
  EXPECT_EQ(h_->restore(f), "first draft");

  test::write_file(f, "second draft, longer");
  ASSERT_TRUE(h_->wait_done("UPDATE", f, 2));
  EXPECT_EQ(h_->ops(f), "UPDATE UPDATE");
  EXPECT_EQ(h_->restore(f), "second draft, longer");
  EXPECT_EQ(h_->restore(f, 1), "first draft");

  ASSERT_EQ(::chmod(f.c_str(), 0600), 0);
  ASSERT_TRUE(h_->wait_done("STAT", f));
  EXPECT_EQ(h_->ops(f), "UPDATE UPDATE STAT");
  EXPECT_EQ(h_->restore(f), "second draft, longer");
  struct stat st {};
  ASSERT_EQ(::stat(h_->restored_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  fs::remove(f);
  ASSERT_TRUE(h_->wait_done("DELETE", f));
  EXPECT_EQ(h_->ops(f), "UPDATE UPDATE STAT DELETE");
  EXPECT_EQ(h_->restore(f), std::nullopt) << "the latest version is the deletion";
  EXPECT_EQ(h_->restore(f, 2), "second draft, longer");
  EXPECT_EQ(h_->failures(), "");
  EXPECT_EQ(h_->stop(), 0);
}

// The history follows the file: the new name begins with a MOVE version naming the old one,
// and the old name's versions stay readable there (a path's history begins when the path
// does).
TEST_F(MonitorChanges, RenamedFileKeepsItsHistoryUnderTheOldNameAndLinksTheNewOne) {
  const auto a = h_->path("a.txt");
  const auto b = h_->path("b.txt");
  test::write_file(a, "v1");
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  ASSERT_TRUE(h_->wait_done("SCAN", h_->src().string()));  // the catch-up's, with a in it
  test::write_file(a, "v2");
  ASSERT_TRUE(h_->wait_done("UPDATE", a));

  fs::rename(a, b);
  ASSERT_TRUE(test::wait_until(
      [&] { return h_->items("MOVE", a, "COMPLETED") == 1 && h_->open_items() == 0; }, 60s));
  EXPECT_EQ(h_->ops(b), "MOVE");
  EXPECT_EQ(h_->versions(b).back().extra, "from=" + a);
  EXPECT_EQ(h_->ops(a), "UPDATE UPDATE MOVE");
  EXPECT_EQ(h_->versions(a).back().extra, "to=" + b);
  EXPECT_EQ(h_->restore(b), "v2");
  EXPECT_EQ(h_->restore(a, 1), "v1");
  EXPECT_EQ(h_->restore(a), std::nullopt);
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorChanges, RenamedDirectoryLinksEveryPathBeneathItToItsOldName) {
  test::write_file(h_->path("old/x"), "x1");
  test::write_file(h_->path("old/deep/y"), "y1");
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  // The catch-up's SCANs of each folder, with its files.
  ASSERT_TRUE(h_->wait_done("SCAN", h_->path("old/deep")));
  ASSERT_TRUE(h_->wait_done("SCAN", h_->path("old")));

  fs::rename(h_->path("old"), h_->path("new"));
  ASSERT_TRUE(test::wait_until(
      [&] { return h_->items("MOVE", h_->path("old"), "COMPLETED") == 1 && h_->open_items() == 0; },
      60s));
  EXPECT_EQ(h_->ops(h_->path("new/x")), "MOVE");
  EXPECT_EQ(h_->versions(h_->path("new/x")).back().extra, "from=" + h_->path("old/x"));
  EXPECT_EQ(h_->ops(h_->path("new/deep/y")), "MOVE");
  EXPECT_EQ(h_->restore(h_->path("new/deep/y")), "y1");
  EXPECT_EQ(h_->restore(h_->path("old/x")), std::nullopt);
  EXPECT_EQ(h_->restore(h_->path("old/x"), 1), "x1");
  // The watches moved with the directory.
  test::write_file(h_->path("new/deep/y"), "y2");
  ASSERT_TRUE(h_->wait_done("UPDATE", h_->path("new/deep/y")));
  EXPECT_EQ(h_->ops(h_->path("new/deep/y")), "MOVE UPDATE");
  EXPECT_EQ(h_->restore(h_->path("new/deep/y")), "y2");
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorChanges, MkdirPWithImmediateWritesMissesNothing) {
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  for (int i = 0; i < 10; ++i) {
    const auto dir = h_->path(fmt::format("t{}/a/b/c", i));
    fs::create_directories(dir);
    test::write_file(dir + "/f", fmt::format("content {}", i));
  }
  for (int i = 0; i < 10; ++i) {
    const auto f = h_->path(fmt::format("t{}/a/b/c/f", i));
    ASSERT_TRUE(h_->wait_done("UPDATE", f));
    EXPECT_EQ(h_->restore(f), fmt::format("content {}", i));
    EXPECT_EQ(h_->ops(h_->path(fmt::format("t{}/a/b", i))), "UPDATE");
  }
  EXPECT_EQ(h_->failures(), "");
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorChanges, NamesWithNewlinesTabsPercentAndInvalidUtf8) {
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  const std::string name = std::string("odd\nname\twith%41 and \xff\xfe bytes");
  const auto f = h_->path(name);
  test::write_file(f, "odd content");
  ASSERT_TRUE(h_->wait_done("UPDATE", f));
  EXPECT_EQ(h_->ops(f), "UPDATE");
  EXPECT_EQ(h_->restore(f), "odd content");
  fs::rename(f, h_->path(name + "\n2"));
  ASSERT_TRUE(test::wait_until(
      [&] { return h_->items("MOVE", f, "COMPLETED") == 1 && h_->open_items() == 0; }, 60s));
  EXPECT_EQ(h_->restore(h_->path(name + "\n2")), "odd content");
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorChanges, SymlinksAreArchivedAsLinksAndNeverFollowed) {
  test::TempDir outside;
  test::write_file(outside / "secret", "outside the tree");
  h_->start();
  ASSERT_TRUE(h_->wait_catchup());
  fs::create_directory_symlink(outside.path(), h_->path("link"));
  ASSERT_TRUE(h_->wait_done("UPDATE", h_->path("link")));
  EXPECT_EQ(h_->versions(h_->path("link")).at(0).extra, "link=" + outside.path().string());
  test::write_file(outside / "more", "x");
  test::write_file(h_->path("marker"), "m");  // something that is seen, to know we waited
  ASSERT_TRUE(h_->wait_done("UPDATE", h_->path("marker")));
  EXPECT_EQ(
      h_->db().count(
          "SELECT count(*) FROM timewarp.items WHERE path LIKE '%secret%' OR path LIKE '%more%'"),
      0);
  EXPECT_EQ(h_->stop(), 0);
}

TEST_F(MonitorChanges, BurstOfTenThousandNewFiles) {
  h_->start({"--archivers=6", "--batch-size=500"});
  ASSERT_TRUE(h_->wait_catchup());
  const auto started = std::chrono::steady_clock::now();
  fs::create_directories(h_->path("burst"));
  for (int i = 0; i < 10000; ++i) {
    test::write_file(h_->path(fmt::format("burst/f{:05d}", i)), fmt::format("file {}", i));
  }
  const auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const double written = since_start();
  // Queued: the monitor's part. Archived: the scheduler's and archivers'.
  ASSERT_TRUE(test::wait_until(
      [&] {
        return h_->db().count(
                   "SELECT count(DISTINCT path) FROM timewarp.items WHERE path LIKE "
                   "'%/burst/f%'") == 10000;
      },
      60s, 50ms));
  const double queued = since_start();
  ASSERT_TRUE(test::wait_until(
      [&] {
        return h_->db().count(
                   "SELECT count(DISTINCT path) FROM timewarp.items WHERE status = 'COMPLETED' "
                   "AND op = 'UPDATE' AND path LIKE '%/burst/f%'") == 10000 &&
               h_->open_items() == 0;
      },
      120s, 100ms))
      << h_->db().count(
             "SELECT count(DISTINCT path) FROM timewarp.items WHERE path LIKE '%/burst/f%'")
      << " distinct paths queued";
  const double archived = since_start();
  std::cout << fmt::format(
      "10,000 files: written in {:.1f} s, all queued after {:.1f} s, all archived "
      "after {:.1f} s ({} items)\n",
      written, queued, archived,
      h_->db().scalar("SELECT count(*) FROM timewarp.items WHERE path LIKE '%/burst/f%'"));
  EXPECT_EQ(h_->failures(), "");
  for (int i : {0, 1, 4999, 9998, 9999}) {
    EXPECT_EQ(h_->restore(h_->path(fmt::format("burst/f{:05d}", i))), fmt::format("file {}", i));
  }
  std::string out;
  ASSERT_EQ(test::run_command({test::cli_exe(), "--backup-root=" + h_->archive(), "versions", "-r",
                               "--json", h_->path("burst")},
                              &out),
            0);
  std::set<std::string> paths;  // the paths with versions
  const auto listed = nlohmann::json::parse(out);
  for (const auto& one : listed.at("paths")) {
    if (!one.at("versions").empty()) paths.insert(one.at("path"));
  }
  EXPECT_EQ(paths.size(), 10001u);  // the files and their directory
  EXPECT_EQ(h_->stop(), 0);
}

}  // namespace
}  // namespace tw

namespace tw {
namespace {

// The monitor's own retention schedule (retention_interval): with a policy that keeps only
// each path's latest version, a run thins the history without anyone typing `forget`, and
// its collection is logged; archiving goes on meanwhile and the archive stays whole.
TEST(MonitorRetention, ScheduledRunThinsTheHistoryAndCollects) {
  TW_REQUIRE_DATABASE();
  test::MonitorHarness h;
  const auto f = h.path("db.bin");
  h.start({"--archivers=1", "--retention-interval=1", "--keep-within=0", "--keep-hourly=0",
           "--keep-daily=0", "--keep-weekly=0"});
  ASSERT_TRUE(h.wait_catchup());
  for (int i = 1; i <= 4; ++i) {
    test::write_file(f, fmt::format("version {} of the database", i));
    ASSERT_TRUE(h.wait_done("UPDATE", f, i));
  }
  // Runs are due a second after the last collection: within a few, the history is thinned
  // to its latest version.
  const bool thinned =
      test::wait_until([&] { return h.versions(f).size() == 1; }, std::chrono::seconds(60));
  EXPECT_TRUE(thinned) << h.ops(f);
  EXPECT_EQ(h.restore(f), "version 4 of the database");
  ASSERT_TRUE(test::wait_until(
      [&] {
        return test::read_file(h.log_file()).find("retention run finished") != std::string::npos;
      },
      std::chrono::seconds(30)));
  const std::string log = test::read_file(h.log_file());
  EXPECT_NE(log.find("retention run: collection "), std::string::npos) << log;
  EXPECT_EQ(log.find("retention run failed"), std::string::npos) << log;
  EXPECT_EQ(h.stop(), 0);
  std::string out;
  EXPECT_EQ(test::run_command({test::cli_exe(), "--backup-root=" + h.archive(), "verify"}, &out), 0)
      << out;
  EXPECT_EQ(h.failures(), "");
}

}  // namespace
}  // namespace tw
