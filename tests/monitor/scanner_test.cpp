// The catch-up scan against a real archive written by the real store.
#include "monitor/scanner.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "archive/store.hpp"
#include "common/paths.hpp"
#include "support/test_support.hpp"

namespace tw::monitor {
namespace {

namespace fs = std::filesystem;

class ScannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = (dir_ / "src").string();
    fs::create_directories(src_);
    auto store = archive::Store::open((dir_ / "archive").string(), archive::Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    store_.emplace(std::move(store.value()));
  }

  std::string path(const std::string& name) const { return src_ + "/" + name; }
  void write(const std::string& name, const std::string& content) {
    test::write_file(path(name), content);
  }
  // Archives everything now in the source tree (as the archivers would).
  void archive_all() {
    ASSERT_EQ(store_->update(src_).outcome, Outcome::Complete);
    for (auto it = fs::recursive_directory_iterator(src_); it != fs::recursive_directory_iterator();
         ++it) {
      const auto r = store_->update(it->path().string());
      ASSERT_EQ(r.outcome, Outcome::Complete) << r.message;
    }
  }
  std::vector<std::string> scan(Filter filter = {}, const PendingSet* pending = nullptr,
                                std::vector<std::string>* dirs = nullptr) {
    if (filter.roots().empty()) filter = Filter({src_}, {}, {}, 0);
    ArchiveView view((dir_ / "archive").string());
    Scanner scanner(filter, view);
    std::vector<Change> changes;
    scanner.scan(
        {src_, src_, true, pending},
        [&](const std::string& d) {
          if (dirs) dirs->push_back(d);
        },
        changes);
    std::vector<std::string> out;
    for (const auto& c : changes) out.push_back(std::string(to_string(c.op)) + " " + c.path);
    std::sort(out.begin(), out.end());
    return out;
  }

  test::TempDir dir_;
  std::string src_;
  std::optional<archive::Store> store_;
};

TEST_F(ScannerTest, EverythingIsNewWhenTheArchiveDoesNotExistYet) {
  write("a", "1");
  write("d/b", "2");
  ArchiveView view((dir_ / "no-archive").string());
  const Filter filter({src_}, {}, {}, 0);
  Scanner scanner(filter, view);
  std::vector<Change> changes;
  scanner.scan({src_, src_, true, nullptr}, {}, changes);
  EXPECT_EQ(changes.size(), 4u);  // src, a, d, d/b
  for (const auto& c : changes) EXPECT_EQ(c.op, Op::Update);
}

// The scheduler holds back every path inside a directory whose request runs: a directory
// queued before its entries would stall them all until it is done.
TEST_F(ScannerTest, ADirectoryIsQueuedAfterEverythingBeneathIt) {
  write("a", "1");
  write("d/b", "2");
  write("d/e/c", "3");
  write("d/e/f", "4");
  write("g/h", "5");
  ArchiveView view((dir_ / "no-archive").string());
  const Filter filter({src_}, {}, {}, 0);
  for (const std::size_t budget : {std::size_t{1}, std::size_t{1000}}) {
    ScanWalk walk(filter, view, {src_, src_, true, nullptr});
    std::vector<Change> changes;
    while (!walk.step(budget, {}, changes)) {
    }
    ASSERT_EQ(changes.size(), 9u);  // src, a, d, d/b, d/e, d/e/c, d/e/f, g, g/h
    EXPECT_EQ(walk.stats().changes, changes.size());
    for (std::size_t i = 0; i < changes.size(); ++i) {
      for (std::size_t j = i + 1; j < changes.size(); ++j) {
        EXPECT_FALSE(path_within(changes[j].path, changes[i].path))
            << changes[j].path << " is queued after " << changes[i].path << " (budget " << budget
            << ")";
      }
    }
    EXPECT_EQ(changes.back().path, src_);
  }
}

// A folder of many files is listed, and its SCAN queued, before the small folders beside
// it: one SCAN runs on one archiver, and found last it would end a first backup alone.
// (Listing order is the filesystem's; with 40 small siblings a walk in that order enters
// the large one first 1 time in 41.)
TEST_F(ScannerTest, ALargeDirectoryIsListedBeforeTheSmallOnesBesideIt) {
  for (int i = 0; i < 40; ++i) write(fmt::format("top/small{}/f", i), "s");
  for (int i = 0; i < 400; ++i) write(fmt::format("top/large/file-with-a-long-name-{}", i), "l");
  struct stat small {
  }, large{};
  ASSERT_EQ(::lstat(path("top/small0").c_str(), &small), 0);
  ASSERT_EQ(::lstat(path("top/large").c_str(), &large), 0);
  if (large.st_size <= small.st_size) {
    GTEST_SKIP() << "this filesystem does not report a directory's size by its entries";
  }
  ArchiveView view((dir_ / "no-archive").string());
  const Filter filter({src_}, {}, {}, 0);
  for (const std::size_t budget : {std::size_t{1}, std::size_t{1000}}) {
    ScanWalk walk(filter, view, {src_, src_, true, nullptr, kRescanPriority, true});
    std::vector<std::string> entered;
    std::vector<Change> changes;
    while (!walk.step(
        budget, [&](const std::string& d) { entered.push_back(d); }, changes)) {
    }
    ASSERT_EQ(entered.size(), 43u);
    EXPECT_EQ(entered[2], path("top/large")) << "budget " << budget;
    ASSERT_FALSE(changes.empty());
    EXPECT_EQ(changes.front().path, path("top/large")) << "budget " << budget;
    EXPECT_EQ(changes.front().op, Op::Scan);
  }
}

TEST_F(ScannerTest, AnUnchangedTreeQueuesNothing) {
  write("a", "1");
  write("d/e/b", "2");
  ::symlink("a", path("link").c_str());
  archive_all();
  EXPECT_EQ(scan(), std::vector<std::string>{});
}

TEST_F(ScannerTest, OnlyWhatChangedIsQueued) {
  write("same", "1");
  write("content", "1");
  write("mode", "1");
  write("gone", "1");
  write("d/gone-too", "1");
  write("d/gone-three", "1");
  write("kept/x", "1");
  ::symlink("a", path("link").c_str());
  archive_all();
  write("content", "22");
  ::chmod(path("mode").c_str(), 0600);
  fs::remove(path("gone"));
  fs::remove_all(path("d"));
  write("new", "3");
  write("newdir/f", "4");
  fs::remove(path("link"));
  ::symlink("b", path("link").c_str());
  EXPECT_EQ(scan(), (std::vector<std::string>{
                        "DELETE " + path("d"),  // one DELETE for the whole gone subtree
                        "DELETE " + path("gone"),
                        "STAT " + src_,  // entries came and went: its mtime changed
                        "STAT " + path("mode"),
                        "UPDATE " + path("content"),
                        "UPDATE " + path("link"),
                        "UPDATE " + path("new"),
                        "UPDATE " + path("newdir"),
                        "UPDATE " + path("newdir/f"),
                    }));
}

TEST_F(ScannerTest, ADirectoryThatChangesAsTheWalkEntersItIsQueued) {
  write("d/a", "1");
  // An old time, so that the entry made below changes it whatever the clock's grain.
  const struct timespec old[2] = {{946684800, 0}, {946684800, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path("d").c_str(), old, AT_SYMLINK_NOFOLLOW), 0);
  archive_all();
  ArchiveView view((dir_ / "archive").string());
  const Filter filter({src_}, {}, {}, 0);
  Scanner scanner(filter, view);
  std::vector<Change> changes;
  // The walk enters d (where the watcher adds d's watch) after its parent listed it: an
  // entry made in d between the two changes d's times, and no event tells of it.
  scanner.scan(
      {src_, src_, true, nullptr},
      [&](const std::string& d) {
        if (d == path("d")) write("d/late", "2");
      },
      changes);
  std::vector<std::string> out;
  for (const auto& c : changes) out.push_back(std::string(to_string(c.op)) + " " + c.path);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"STAT " + path("d"), "UPDATE " + path("d/late")}));
}

TEST_F(ScannerTest, ContentRewrittenWithTheSameSizeIsFoundByItsTime) {
  write("f", "aaaa");
  archive_all();
  struct timespec times[2] = {{0, UTIME_OMIT}, {1700000000, 123456789}};
  write("f", "bbbb");
  ::utimensat(AT_FDCWD, path("f").c_str(), times, 0);
  EXPECT_EQ(scan(), std::vector<std::string>{"UPDATE " + path("f")});
}

TEST_F(ScannerTest, WorkAlreadyQueuedIsNotQueuedTwice) {
  write("a", "1");
  write("b", "1");
  archive_all();
  write("a", "22");
  write("c", "3");
  fs::remove(path("b"));
  PendingSet pending;
  pending.paths[path("a")] = PendingSet::kUpdate;
  pending.paths[path("b")] = PendingSet::kDelete;
  EXPECT_EQ(scan({}, &pending), (std::vector<std::string>{"STAT " + src_, "UPDATE " + path("c")}));
}

TEST_F(ScannerTest, LinksAreNotFollowedAndSpecialFilesNotQueued) {
  write("real/f", "1");
  fs::create_directory_symlink(path("real"), path("linkdir"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  std::vector<std::string> dirs;
  const auto changes = scan({}, nullptr, &dirs);
  EXPECT_EQ(changes,
            (std::vector<std::string>{"UPDATE " + src_, "UPDATE " + path("linkdir"),
                                      "UPDATE " + path("real"), "UPDATE " + path("real/f")}));
  EXPECT_EQ(dirs, (std::vector<std::string>{src_, path("real")}));  // never the link's target
}

TEST_F(ScannerTest, ASourceDirectoryGivenAsALinkIsResolvedOnceAndALinkIsNeverEntered) {
  write("f", "1");
  const std::string link = (dir_ / "src-link").string();
  fs::create_directory_symlink(src_, link);
  Config config;
  config.source_dirs = {link};
  config.backup_root = link + "/archive-inside";
  config.exclude = {link + "/skip/*"};
  const Filter resolved = Filter::from_config(config);
  const std::string real = fs::canonical(src_).string();
  ASSERT_EQ(resolved.roots(), std::vector<std::string>{real});
  EXPECT_TRUE(resolved.excluded(real + "/archive-inside/x")) << "the backup root, resolved too";
  EXPECT_TRUE(resolved.excluded(real + "/skip/x")) << "an absolute glob follows its root";
  EXPECT_FALSE(resolved.excluded(real + "/f"));
  EXPECT_EQ(scan(resolved), (std::vector<std::string>{"UPDATE " + real, "UPDATE " + real + "/f"}));
  // A walk that finds a link where a directory should be (a source directory replaced by
  // one after the start) enters nothing: the archiver would see nothing there.
  ArchiveView view((dir_ / "archive").string());
  const Filter unresolved({link}, {}, {}, 0);
  Scanner scanner(unresolved, view);
  std::vector<Change> changes;
  std::vector<std::string> dirs;
  scanner.scan(
      {link, link, true, nullptr}, [&](const std::string& d) { dirs.push_back(d); }, changes);
  EXPECT_TRUE(changes.empty());
  EXPECT_TRUE(dirs.empty());
}

TEST_F(ScannerTest, FiltersApplyAndExcludedDirectoriesAreNotEntered) {
  write("keep.txt", "1");
  write("skip.tmp", "1");
  write("cache/deep/x", "1");
  write("big", std::string(2000, 'x'));
  std::vector<std::string> dirs;
  const auto changes = scan(Filter({src_}, {"*.tmp", "cache"}, {}, 1000), nullptr, &dirs);
  EXPECT_EQ(changes, (std::vector<std::string>{"UPDATE " + src_, "UPDATE " + path("keep.txt")}));
  EXPECT_EQ(dirs, std::vector<std::string>{src_});
}

TEST_F(ScannerTest, ArchivedButNowExcludedPathsAreNotDeleted) {
  write("a.tmp", "1");
  archive_all();
  EXPECT_EQ(scan(Filter({src_}, {"*.tmp"}, {}, 0)), std::vector<std::string>{});
}

TEST_F(ScannerTest, NamesWithNewlinesTabsPercentAndInvalidUtf8) {
  const std::string odd = std::string("new\nline\ttab%25\xff\xfe name");
  write(odd, "1");
  auto changes = scan();
  EXPECT_EQ(changes, (std::vector<std::string>{"UPDATE " + src_, "UPDATE " + path(odd)}));
  archive_all();
  EXPECT_EQ(scan(), std::vector<std::string>{});
}

TEST_F(ScannerTest, ARenamedDirectoryIsComparedWithItsOldName) {
  write("old/same", "1");
  write("old/edited", "1");
  archive_all();
  fs::rename(path("old"), path("new"));
  write("new/edited", "22");
  write("new/added", "3");
  ArchiveView view((dir_ / "archive").string());
  const Filter filter({src_}, {}, {}, 0);
  Scanner scanner(filter, view);
  std::vector<Change> changes;
  scanner.scan({path("new"), path("old"), false, nullptr}, {}, changes);
  std::vector<std::string> out;
  for (const auto& c : changes) out.push_back(std::string(to_string(c.op)) + " " + c.path);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"STAT " + path("new"), "UPDATE " + path("new/added"),
                                           "UPDATE " + path("new/edited")}));
}

TEST_F(ScannerTest, ARenamedDirectoryLosesUnderItsNewNameWhatLeftTheOldOne) {
  write("old/kept", "1");
  write("old/gone", "1");
  write("old/sub/x", "1");
  archive_all();
  fs::remove(path("old/gone"));
  fs::remove_all(path("old/sub"));
  fs::rename(path("old"), path("new"));
  ArchiveView view((dir_ / "archive").string());
  const Filter filter({src_}, {}, {}, 0);
  Scanner scanner(filter, view);
  std::vector<Change> changes;
  scanner.scan({path("new"), path("old"), true, nullptr}, {}, changes);
  std::vector<std::string> out;
  for (const auto& c : changes) out.push_back(std::string(to_string(c.op)) + " " + c.path);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"DELETE " + path("new/gone"),
                                           "DELETE " + path("new/sub"), "STAT " + path("new")}));
}

TEST_F(ScannerTest, AWalkInSlicesFindsWhatAWholeScanFinds) {
  for (int i = 0; i < 40; ++i) write(fmt::format("d{}/f{}", i % 4, i), "1");
  write("gone/x", "1");
  archive_all();
  fs::remove_all(path("gone"));
  for (int i = 0; i < 40; i += 3) write(fmt::format("d{}/f{}", i % 4, i), "changed");
  const auto whole = scan();
  ArchiveView view((dir_ / "archive").string());
  const Filter filter({src_}, {}, {}, 0);
  ScanWalk walk(filter, view, {src_, src_, true, nullptr, kRescanPriority});
  std::vector<Change> changes;
  int steps = 0;
  while (!walk.step(3, {}, changes)) ++steps;
  EXPECT_GT(steps, 15);  // 46 entries on disk, 47 archived: three at a time
  std::vector<std::string> out;
  for (const auto& c : changes) {
    out.push_back(std::string(to_string(c.op)) + " " + c.path);
    EXPECT_EQ(c.priority, kRescanPriority);
  }
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, whole);
  EXPECT_EQ(walk.stats().changes, whole.size());
}

// A whole source's scan (a first backup here) queues each directory with the entries that
// differ as one SCAN, in the directory's place (after everything beneath it), in slices
// or at once; a file of 1 MiB or more keeps an item of its own.
TEST_F(ScannerTest, AWholeSourceScanQueuesADirectoryAndItsEntriesAsOneScan) {
  write("a", "1");
  write("big", std::string(1 << 20, 'b'));
  write("d/b", "2");
  write("d/e/c", "3");
  write("d/e/f", "4");
  write("g/h", "5");
  fs::create_directories(path("empty"));
  ArchiveView view((dir_ / "no-archive").string());
  const Filter filter({src_}, {}, {}, 0);
  for (const std::size_t budget : {std::size_t{1}, std::size_t{1000}}) {
    ScanWalk walk(filter, view, {src_, src_, true, nullptr, kRescanPriority, true});
    std::vector<Change> changes;
    while (!walk.step(budget, {}, changes)) {
    }
    std::vector<std::string> out;
    std::size_t weight = 0;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      const Change& c = changes[i];
      out.push_back(std::string(to_string(c.op)) + " " + c.path);
      EXPECT_EQ(c.priority, kRescanPriority);
      weight += c.weight;
      if (c.path == path("d/e")) {
        EXPECT_EQ(c.size, 2) << "the bytes of the entries it stands for";
      }
      for (std::size_t j = i + 1; j < changes.size(); ++j) {
        EXPECT_FALSE(path_within(changes[j].path, c.path))
            << changes[j].path << " after " << c.path;
      }
    }
    std::sort(out.begin(), out.end());
    EXPECT_EQ(out, (std::vector<std::string>{"SCAN " + src_, "SCAN " + path("d"),
                                             "SCAN " + path("d/e"), "SCAN " + path("g"),
                                             "UPDATE " + path("big"), "UPDATE " + path("empty")}))
        << "budget " << budget;
    EXPECT_EQ(walk.stats().changes, changes.size());
    EXPECT_EQ(weight, 11u) << "every directory and file it stands for";
  }
}

TEST_F(ScannerTest, AScanIsQueuedWhereAQuarterOfTheEntriesDifferAndNotForHugeDirectories) {
  for (int i = 0; i < 20; ++i) write(fmt::format("d/f{:02}", i), "1");
  archive_all();
  const auto whole = [&](ScanLimits limits) {
    ArchiveView view((dir_ / "archive").string());
    const Filter filter({src_}, {}, {}, 0);
    Scanner scanner(filter, view);
    std::vector<Change> changes;
    scanner.scan({src_, src_, true, nullptr, kLivePriority, true, limits}, {}, changes);
    std::vector<std::string> out;
    for (const auto& c : changes) out.push_back(std::string(to_string(c.op)) + " " + c.path);
    std::sort(out.begin(), out.end());
    return out;
  };
  for (int i = 0; i < 4; ++i) write(fmt::format("d/f{:02}", i), "22");
  EXPECT_EQ(whole({}),
            (std::vector<std::string>{"UPDATE " + path("d/f00"), "UPDATE " + path("d/f01"),
                                      "UPDATE " + path("d/f02"), "UPDATE " + path("d/f03")}));
  write("d/f04", "22");
  EXPECT_EQ(whole({}), std::vector<std::string>{"SCAN " + path("d")});
  // More entries than one SCAN takes: an item each, as they are found.
  for (int i = 0; i < 1100; ++i) write(fmt::format("h/f{:04}", i), "x");
  const auto found = whole({.max_entries = 1024});
  EXPECT_EQ(found.size(), 1u + 1102u);  // SCAN d, h and its files, the source's STAT
  EXPECT_EQ(std::count(found.begin(), found.end(), "UPDATE " + path("h/f1099")), 1);
  EXPECT_EQ(std::count(found.begin(), found.end(), "UPDATE " + path("h")), 1);
  // Within the default bounds the same folder is one SCAN.
  EXPECT_EQ(whole({}),
            (std::vector<std::string>{"SCAN " + path("d"), "SCAN " + path("h"), "STAT " + src_}));
}

// A first backup: with nothing archived beneath the source when the walk begins, the walk
// takes every entry as new and reads the archive no more, even where the archivers have
// written meanwhile (their versions came from changes queued already). With anything
// archived there at the start, it compares each entry with the archive as it goes.
TEST_F(ScannerTest, AWalkThatBeginsWithNothingArchivedReadsTheArchiveNoFurther) {
  write("d/a", "1");
  write("d/b", "2");
  const auto walk = [&] {
    ArchiveView view((dir_ / "archive").string());
    const Filter filter({src_}, {}, {}, 0);
    Scanner scanner(filter, view);
    std::vector<Change> changes;
    const auto archive_a = [&](const std::string& d) {
      if (d == path("d")) {
        ASSERT_EQ(store_->update(path("d/a")).outcome, Outcome::Complete);
      }
    };
    scanner.scan({src_, src_, true, nullptr}, archive_a, changes);
    std::vector<std::string> out;
    for (const auto& c : changes) out.push_back(std::string(to_string(c.op)) + " " + c.path);
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(walk(), (std::vector<std::string>{"UPDATE " + src_, "UPDATE " + path("d"),
                                              "UPDATE " + path("d/a"), "UPDATE " + path("d/b")}));
  write("d/a", "11");  // archived at the start now (by the walk above): compared as it goes
  EXPECT_EQ(walk(), (std::vector<std::string>{"UPDATE " + src_, "UPDATE " + path("d"),
                                              "UPDATE " + path("d/b")}));
}

// More differing bytes than one SCAN takes: the folder's changes go out as items, found
// as the listing goes (the bytes are counted before the folder is left).
TEST_F(ScannerTest, AFolderOfMoreBytesThanOneScanTakesIsQueuedAsItems) {
  for (int i = 0; i < 6; ++i) write(fmt::format("d/f{}", i), std::string(1000, 'x'));
  ArchiveView view((dir_ / "no-archive").string());
  const Filter filter({src_}, {}, {}, 0);
  const auto ops = [&](ScanLimits limits) {
    Scanner scanner(filter, view);
    std::vector<Change> changes;
    scanner.scan({src_, src_, true, nullptr, kLivePriority, true, limits}, {}, changes);
    std::map<std::string, int> out;
    for (const auto& c : changes) ++out[std::string(to_string(c.op))];
    return out;
  };
  // The source (no entries but d) is an UPDATE either way.
  EXPECT_EQ(ops({.max_bytes = 6000}), (std::map<std::string, int>{{"SCAN", 1}, {"UPDATE", 1}}));
  EXPECT_EQ(ops({.max_bytes = 5999}), (std::map<std::string, int>{{"UPDATE", 8}}));
}

}  // namespace
}  // namespace tw::monitor
