// An archive written by the release before format 2 (tests/data/format1-archive.tar.gz,
// made by tests/data/make-format1-archive.sh with that release's timewarp-archiver) is
// listed, restored and verified by today's code, and stays format 1 when written to.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "archive_test_util.hpp"
#include "archiver/sha256.hpp"
#include "archiver/store.hpp"

namespace tw::archive {
namespace {

const std::string kSource = "/timewarp-fixture/src";

class Format1Compat : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string command = "tar -xzf '" TW_TEST_DATA_DIR "/format1-archive.tar.gz' -C '" +
                                dir_.path() + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  std::string archive() const { return dir_ / "archive"; }

  test::TempDir dir_;
};

TEST_F(Format1Compat, ListsRestoresAndVerifiesTheOldArchive) {
  auto store = Store::open(archive(), Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  EXPECT_EQ(store->format(), ArchiveFormat::V1);

  auto notes = store->versions(kSource + "/notes.txt");
  ASSERT_TRUE(notes) << notes.error();
  ASSERT_EQ(notes->size(), 2u);
  EXPECT_EQ((*notes)[0].sha256, sha256_hex("first version\n"));
  EXPECT_EQ((*notes)[0].mtime_ns, 1767323045123456789);  // 2026-01-02T03:04:05.123456789Z
  EXPECT_EQ((*notes)[1].sha256, sha256_hex("first version\nsecond version, longer\n"));
  auto gone = store->versions(kSource + "/dir/gone.txt");
  ASSERT_TRUE(gone);
  ASSERT_EQ(gone->size(), 2u);
  EXPECT_FALSE(gone->back().exists());
  auto within = store->paths_within(kSource);
  ASSERT_TRUE(within);
  EXPECT_EQ(within->size(), 8u);

  // The first version of one file, then the whole tree as it is now.
  RestoreOptions first;
  first.which.number = 1;
  first.destination = dir_ / "notes-v1.txt";
  ASSERT_TRUE(store->restore(kSource + "/notes.txt", first));
  EXPECT_EQ(test::read_file(dir_ / "notes-v1.txt"), "first version\n");
  RestoreOptions tree;
  tree.destination = dir_ / "restored";
  auto report = store->restore(kSource, tree);
  ASSERT_TRUE(report) << report.error();
  EXPECT_TRUE(report->problems.empty());
  const std::string out = dir_ / "restored";
  EXPECT_EQ(test::read_file(out + "/notes.txt"), "first version\nsecond version, longer\n");
  EXPECT_EQ(test::read_file(out + "/odd\tname %\xff.txt"), "tab\there");
  EXPECT_EQ(std::filesystem::read_symlink(out + "/link"), "notes.txt");
  EXPECT_EQ(test::read_file(out + "/dir/sub/deep.txt"), "deep\n");
  EXPECT_FALSE(std::filesystem::exists(out + "/dir/gone.txt"));

  const VerifyReport verified = store->verify();
  EXPECT_TRUE(verified.ok());
  EXPECT_EQ(verified.histories, 8u);
}

TEST_F(Format1Compat, NewVersionsOfTheOldArchiveStayFormat1) {
  auto store = Store::open(archive(), Store::Mode::ReadWrite);
  ASSERT_TRUE(store) << store.error();
  EXPECT_EQ(store->format(), ArchiveFormat::V1);
  test::write_file(dir_ / "new.txt", "new");
  ASSERT_EQ(store->update(dir_ / "new.txt").outcome, Outcome::Complete);
  EXPECT_EQ(store->versions(dir_ / "new.txt")->size(), 1u);
  EXPECT_EQ(test::read_file(archive() + "/FORMAT"), "timewarp-archive 1\n");
  EXPECT_FALSE(std::filesystem::exists(archive() + "/catalog.db"));
  EXPECT_TRUE(store->verify().ok());
}

}  // namespace
}  // namespace tw::archive
