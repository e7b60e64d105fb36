// SCAN: a directory and its entries in one request (Store::scan; FORMAT.md, "Operations").
// It must leave the archive as an UPDATE of the directory and of each entry would, read
// only what differs, leave alone what the filter leaves alone, never follow a link, and
// go on past an entry it cannot archive.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/store.hpp"
#include "archive_test_util.hpp"
#include "common/filters.hpp"

namespace tw::archive {
namespace {

using test::compare_files;
using test::read_file;
using test::TempDir;
using test::write_file;

class ScanTest : public ::testing::Test {
 protected:
  Store open(StoreHooks hooks = {}) {
    auto store = Store::open(dir_ / "archive", Store::Mode::ReadWrite, std::move(hooks));
    if (!store) throw std::runtime_error(store.error());
    return std::move(store.value());
  }
  static void expect_complete(const ArchiveResult& r) {
    EXPECT_EQ(r.outcome, Outcome::Complete) << r.message;
  }
  std::size_t versions(const std::string& path, Store& store) {
    auto v = store.versions(dir_ / path);
    return v ? v->size() : 0;
  }
  bool live(const std::string& path, Store& store) {
    auto v = store.versions(dir_ / path);
    return v && !v->empty() && v->back().exists();
  }

  TempDir dir_;
};

TEST_F(ScanTest, ArchivesTheDirectoryAndItsEntriesButNotWhatItsSubdirectoriesHold) {
  Store store = open();
  write_file(dir_ / "src/d/a", "alpha", 0600);
  write_file(dir_ / "src/d/b", "");
  write_file(dir_ / "src/d/sub/deep", "deep");
  write_file(dir_ / "outside/secret", "not to be archived");
  ASSERT_EQ(::symlink("a", (dir_ / "src/d/link").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "outside").c_str(), (dir_ / "src/d/away").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir_ / "src/d/fifo").c_str(), 0644), 0);

  expect_complete(store.scan(dir_ / "src/d"));

  for (const char* p : {"src/d", "src/d/a", "src/d/b", "src/d/link", "src/d/away"}) {
    EXPECT_TRUE(live(p, store)) << p;
  }
  EXPECT_EQ(versions("src/d/sub", store), 0u) << "a subdirectory is its own request's";
  EXPECT_EQ(versions("src/d/sub/deep", store), 0u);
  EXPECT_EQ(versions("src/d/fifo", store), 0u) << "a fifo is not archived, and not an error";
  EXPECT_EQ(versions("outside/secret", store), 0u)
      << "a link is archived as a link, never followed";
  EXPECT_EQ(store.versions(dir_ / "src/d/away")->back().link_target, dir_ / "outside");

  RestoreOptions options;
  options.destination = dir_ / "out";
  auto report = store.restore(dir_ / "src/d", options);
  ASSERT_TRUE(report) << report.error();
  for (const char* name : {"a", "b", "link", "away"}) {
    EXPECT_EQ(compare_files(dir_ / "src/d/" + name, dir_ / "out/" + name), "") << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out/sub"));
  EXPECT_TRUE(store.verify().ok());
}

// In a group (as an archiver runs), a folder whose files take more locks than a group
// holds (a path's and a blob's each; kMaxGroupSlots, archive/format2/layout.cpp) is made
// durable in parts midway through its SCAN, and ends whole: every file with its content,
// the folder's look-ups (the staged versions, blobs and children) right across the parts.
TEST_F(ScanTest, AFolderOfMoreFilesThanAGroupHoldsLocksForIsArchivedWholeInParts) {
  Store store = open();
  Store other = open();
  constexpr int kFiles = 2600;
  for (int i = 0; i < kFiles; ++i) {
    // Every tenth file has the content of the one before it: a blob staged in an
    // earlier part of the folder is found, not stored twice.
    write_file(dir_ / fmt::format("src/d/f{}", i),
               fmt::format("content {}", i % 10 == 9 ? i - 1 : i));
  }
  store.begin_group();
  expect_complete(store.scan(dir_ / "src/d"));
  EXPECT_LT(store.staged_versions(), static_cast<std::size_t>(kFiles))
      << "the group was made durable midway";
  EXPECT_GT(versions("src/d/f0", other), 0u) << "the first part is in the catalog";
  ASSERT_TRUE(store.flush());
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_EQ(versions(fmt::format("src/d/f{}", i), other), 1u) << i;
  }
  RestoreOptions options;
  options.destination = dir_ / "out";
  auto report = other.restore(dir_ / "src/d", options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->files, static_cast<std::uint64_t>(kFiles));
  for (int i = 0; i < kFiles; i += 97) {
    EXPECT_EQ(compare_files(dir_ / fmt::format("src/d/f{}", i), dir_ / fmt::format("out/f{}", i)),
              "")
        << i;
  }
  const VerifyReport verified = other.verify();
  EXPECT_TRUE(verified.ok());
  EXPECT_EQ(verified.objects, static_cast<std::uint64_t>(kFiles - kFiles / 10));
}

TEST_F(ScanTest, ReadsOnlyTheEntriesWhoseSizeOrMtimeDifferFromTheArchive) {
  int reads = 0;
  StoreHooks hooks;
  hooks.after_content_read = [&] { ++reads; };
  Store store = open(std::move(hooks));
  for (const char* name : {"a", "b", "c"}) write_file(dir_ / "src/d/" + name, name);
  expect_complete(store.scan(dir_ / "src/d"));
  EXPECT_EQ(reads, 3);

  reads = 0;
  expect_complete(store.scan(dir_ / "src/d"));
  EXPECT_EQ(reads, 0) << "nothing differs: nothing is read";
  EXPECT_EQ(versions("src/d/a", store), 1u);
  EXPECT_EQ(versions("src/d", store), 1u);

  write_file(dir_ / "src/d/b", "bravo");                    // content
  ASSERT_EQ(::chmod((dir_ / "src/d/c").c_str(), 0600), 0);  // metadata only
  expect_complete(store.scan(dir_ / "src/d"));
  EXPECT_EQ(reads, 1) << "only the entry whose size and mtime differ is read";
  EXPECT_EQ(read_file(dir_ / "src/d/b"), "bravo");
  EXPECT_EQ(versions("src/d/b", store), 2u);
  EXPECT_EQ(versions("src/d/c", store), 2u);
  EXPECT_EQ(store.versions(dir_ / "src/d/c")->back().mode & 07777, 0600u);
  EXPECT_EQ(versions("src/d/a", store), 1u);
}

TEST_F(ScanTest, TombstonesWhatTheDirectoryNoLongerHolds) {
  Store store = open();
  write_file(dir_ / "src/d/gone", "gone");
  write_file(dir_ / "src/d/kept", "kept");
  write_file(dir_ / "src/d/sub/deep", "deep");
  expect_complete(store.scan(dir_ / "src/d/sub"));
  expect_complete(store.scan(dir_ / "src/d"));
  ASSERT_TRUE(live("src/d/sub/deep", store));

  std::filesystem::remove(dir_ / "src/d/gone");
  std::filesystem::remove_all(dir_ / "src/d/sub");
  write_file(dir_ / "src/d/sub", "a file where the folder was");
  expect_complete(store.scan(dir_ / "src/d"));
  EXPECT_FALSE(live("src/d/gone", store));
  EXPECT_TRUE(live("src/d/kept", store));
  EXPECT_TRUE(live("src/d/sub", store));
  EXPECT_FALSE(live("src/d/sub/deep", store)) << "what the old folder held is tombstoned";

  // The directory itself gone: everything archived beneath it is tombstoned.
  std::filesystem::remove_all(dir_ / "src/d");
  expect_complete(store.scan(dir_ / "src/d"));
  for (const char* p : {"src/d", "src/d/kept", "src/d/sub"}) EXPECT_FALSE(live(p, store)) << p;
}

TEST_F(ScanTest, AScanOfWhatIsNoLongerADirectoryReconcilesItAsAnUpdate) {
  Store store = open();
  write_file(dir_ / "src/f", "a file");
  expect_complete(store.scan(dir_ / "src/f"));
  EXPECT_TRUE(live("src/f", store));
  // A directory replaced by a link to one: the link is archived, nothing through it.
  write_file(dir_ / "elsewhere/x", "x");
  write_file(dir_ / "src/d/x", "x");
  expect_complete(store.scan(dir_ / "src/d"));
  ASSERT_TRUE(live("src/d/x", store));
  std::filesystem::remove_all(dir_ / "src/d");
  ASSERT_EQ(::symlink((dir_ / "elsewhere").c_str(), (dir_ / "src/d").c_str()), 0);
  expect_complete(store.scan(dir_ / "src/d"));
  EXPECT_TRUE(store.versions(dir_ / "src/d")->back().is_symlink());
  EXPECT_FALSE(live("src/d/x", store));
  EXPECT_EQ(versions("elsewhere/x", store), 0u);
}

TEST_F(ScanTest, LeavesAloneWhatTheFilterLeavesAlone) {
  Store store = open();
  write_file(dir_ / "src/d/keep", "keep");
  write_file(dir_ / "src/d/scratch.tmp", "scratch");
  write_file(dir_ / "src/d/big", std::string(100, 'b'));
  const Filter filter({dir_.path() + "/src"}, {"*.tmp"}, {}, 50);
  expect_complete(store.scan(dir_ / "src/d", {}, &filter));
  EXPECT_TRUE(live("src/d/keep", store));
  EXPECT_EQ(versions("src/d/scratch.tmp", store), 0u);
  EXPECT_EQ(versions("src/d/big", store), 0u);
}

TEST_F(ScanTest, GoesOnPastEntriesItCannotArchiveAndNamesThem) {
  // Every read of `a` (and, in the second round, of `b`) finds it changed meanwhile: those
  // entries fail after their looks; the others are archived all the same.
  bool spoil_b = false;
  StoreHooks hooks;
  int spoiled = 0;
  hooks.after_content_read = [&] {
    write_file(dir_ / "src/d/a", "changed " + std::to_string(++spoiled));
    if (spoil_b) write_file(dir_ / "src/d/b", "changed " + std::to_string(spoiled));
  };
  Store store = open(std::move(hooks));
  for (const char* name : {"a", "b", "c"}) write_file(dir_ / "src/d/" + name, name);

  ArchiveResult r = store.scan(dir_ / "src/d");
  EXPECT_EQ(r.outcome, Outcome::FailedRetry);
  EXPECT_NE(r.message.find("src/d/a"), std::string::npos) << r.message;
  EXPECT_FALSE(live("src/d/a", store));
  EXPECT_TRUE(live("src/d/b", store));
  EXPECT_TRUE(live("src/d/c", store));

  spoil_b = true;
  write_file(dir_ / "src/d/b", "b, longer now");
  r = store.scan(dir_ / "src/d");
  EXPECT_EQ(r.outcome, Outcome::FailedRetry);
  EXPECT_NE(r.message.find("2 entries of"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace tw::archive
