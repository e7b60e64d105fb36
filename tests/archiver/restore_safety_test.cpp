// Root safety of the archive's two ends, through the built programs: `timewarp restore`
// never writes through a symlink at or above its destination and changes the owner and
// mode only of what it made (or, with --force, replaced); the archiver never reads
// through a symlink among the ancestors of the path it archives, even one swapped in
// between the queueing and the archiving. Meant to run as root, as the suite does in CI
// (owners are then checked too); the rest holds for any user.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive_test_util.hpp"
#include "archive/store.hpp"
#include "archive/timefmt.hpp"
#include "common/escape.hpp"
#include "support/test_support.hpp"

namespace tw::archive {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using test::write_file;

constexpr uid_t kNobody = 65534;

struct Owner {
  uid_t uid;
  gid_t gid;
  mode_t mode;
  bool operator==(const Owner& o) const {
    return uid == o.uid && gid == o.gid && mode == o.mode;
  }
};

Owner owner_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return Owner{st.st_uid, st.st_gid, st.st_mode & 07777};
}

std::string describe(const Owner& o) { return fmt::format("{}:{} {:o}", o.uid, o.gid, o.mode); }

class RestoreSafetyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Al's tree: /src/al/docs/{f1, sub/f2}, hers (as root: owned by nobody, mode 0777).
    write_file(docs_ + "/f1", "al's first");
    write_file(docs_ + "/sub/f2", "al's second");
    ::chmod(docs_.c_str(), 0777);
    if (root()) {
      for (const auto& p : {al_, docs_, docs_ + "/f1", docs_ + "/sub", docs_ + "/sub/f2"}) {
        ASSERT_EQ(::lchown(p.c_str(), kNobody, kNobody), 0) << p;
      }
    }
    auto store = Store::open(archive_, Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    for (const auto& p : {docs_ + "/sub/f2", docs_ + "/f1", docs_ + "/sub", docs_}) {
      ASSERT_EQ(store->update(p).outcome, Outcome::Complete) << p;
    }
    // Somebody else's folder (root's, when run as root), which al must not reach.
    write_file(victim_ + "/keep", "not al's");
    ASSERT_EQ(::chmod(victim_.c_str(), 0755), 0);
    victim_before_ = owner_of(victim_);
  }

  static bool root() { return ::geteuid() == 0; }

  // Runs `timewarp --backup-root=ARCHIVE restore ARGS...`; its stdout and stderr in `*out`.
  int restore(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh",
                                     tw::test::cli_exe(), "--backup-root=" + archive_,
                                     "restore"};
    argv.insert(argv.end(), args.begin(), args.end());
    return tw::test::run_command(argv, out);
  }

  // The victim's folder holds only its own file, with its owner and mode unchanged.
  void expect_victim_untouched() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(victim_)) names.push_back(e.path().filename());
    EXPECT_EQ(names, std::vector<std::string>{"keep"}) << "restore wrote into the link's target";
    EXPECT_EQ(test::read_file(victim_ + "/keep"), "not al's");
    EXPECT_EQ(owner_of(victim_), victim_before_)
        << describe(owner_of(victim_)) << " instead of " << describe(victim_before_);
  }

  // Replaces directory `dir` by a symlink to the victim's folder, as al can.
  void swap_for_link(const std::string& dir) {
    fs::remove_all(dir);
    ASSERT_EQ(::symlink(victim_.c_str(), dir.c_str()), 0);
  }

  TempDir dir_;
  std::string archive_ = dir_ / "archive";
  std::string al_ = dir_ / "src/al";
  std::string docs_ = al_ + "/docs";
  std::string victim_ = dir_ / "victim";
  Owner victim_before_{};
};

TEST_F(RestoreSafetyTest, ASymlinkAtTheDestinationIsRefusedNotFollowed) {
  swap_for_link(docs_);
  for (const bool force : {false, true}) {
    std::string out;
    std::vector<std::string> args = {docs_};
    if (force) args.push_back("--force");
    EXPECT_NE(restore(args, &out), 0) << out;
    EXPECT_NE(out.find("is a symlink"), std::string::npos) << out;
    expect_victim_untouched();
  }
  EXPECT_TRUE(fs::is_symlink(docs_));
}

TEST_F(RestoreSafetyTest, ASymlinkAboveTheDestinationIsRefusedNotFollowed) {
  swap_for_link(al_);
  for (const std::string& what : {docs_, docs_ + "/f1", docs_ + "/sub/f2"}) {
    for (const bool force : {false, true}) {
      std::string out;
      std::vector<std::string> args = {what};
      if (force) args.push_back("--force");
      EXPECT_NE(restore(args, &out), 0) << what << ": " << out;
      EXPECT_NE(out.find("is a symlink"), std::string::npos) << out;
      expect_victim_untouched();
    }
  }
}

TEST_F(RestoreSafetyTest, ASingleFileIsNotRestoredThroughALinkedParent) {
  swap_for_link(docs_ + "/sub");
  std::string out;
  EXPECT_NE(restore({docs_ + "/sub/f2", "--force"}, &out), 0) << out;
  expect_victim_untouched();
  // Nor through a destination given with --to that is a link to a folder.
  const std::string to = dir_ / "to";
  ASSERT_EQ(::symlink(victim_.c_str(), to.c_str()), 0);
  EXPECT_NE(restore({docs_ + "/f1", "--to", to}, &out), 0) << out;
  EXPECT_NE(restore({docs_ + "/f1", "--to", to + "/"}, &out), 0) << out;
  expect_victim_untouched();
}

TEST_F(RestoreSafetyTest, AnExistingDestinationKeepsItsOwnerAndModeUnlessForced) {
  // A shared folder such as /tmp: mode 1777, the operator's.
  const std::string shared = dir_ / "shared";
  fs::create_directories(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const Owner before = owner_of(shared);
  std::string out;
  ASSERT_EQ(restore({docs_, "--to", shared}, &out), 0) << out;
  EXPECT_EQ(owner_of(shared), before) << describe(owner_of(shared));
  EXPECT_EQ(test::read_file(shared + "/f1"), "al's first");
  EXPECT_EQ(test::read_file(shared + "/sub/f2"), "al's second");
  // What restore made carries the archived owner and mode.
  EXPECT_EQ(owner_of(shared + "/sub"), owner_of(docs_ + "/sub"));
  EXPECT_EQ(owner_of(shared + "/f1"), owner_of(docs_ + "/f1"));
  // A fresh destination is made by restore: it gets the archived metadata.
  const std::string fresh = dir_ / "fresh/docs";
  ASSERT_EQ(restore({docs_, "--to", fresh}, &out), 0) << out;
  EXPECT_EQ(owner_of(fresh), owner_of(docs_)) << describe(owner_of(fresh));
  // With --force the existing folder is replaced, metadata included.
  ASSERT_EQ(restore({docs_, "--to", shared, "--force"}, &out), 0) << out;
  EXPECT_EQ(owner_of(shared), owner_of(docs_)) << describe(owner_of(shared));
}

TEST_F(RestoreSafetyTest, TheArchiverDoesNotReadThroughALinkSwappedInAfterTheQueueing) {
  // A root-only file elsewhere; al swaps her folder for a link to its folder after her
  // change to docs/f1 was queued and before it is archived.
  const std::string secret_dir = dir_ / "secret";
  write_file(secret_dir + "/f1", "root only");
  ASSERT_EQ(::chmod((secret_dir + "/f1").c_str(), 0600), 0);
  fs::remove_all(docs_);
  ASSERT_EQ(::symlink(secret_dir.c_str(), docs_.c_str()), 0);

  test::ArchiverProcess archiver({{"--backup-root=" + archive_, "--log-level=warn"}, {}, {}});
  for (const std::string& path : {docs_ + "/f1", docs_ + "/sub/f2"}) {
    auto answer = archiver.request(fmt::format("7\tUPDATE\t{}", escape_bytes(path)));
    ASSERT_TRUE(answer);
    EXPECT_EQ(test::fields(*answer).at(1), "COMPLETE") << *answer;
  }
  archiver.close_stdin();
  ASSERT_EQ(archiver.wait(), 0);

  auto store = Store::open(archive_, Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  auto versions = store->versions(docs_ + "/f1");
  ASSERT_TRUE(versions) << versions.error();
  const std::string secret_sha = test::hash_file(secret_dir + "/f1");
  for (const auto& v : *versions) EXPECT_NE(v.sha256, secret_sha) << "the root-only file was archived";
  EXPECT_FALSE(versions->back().exists()) << "docs/f1 is no longer in al's tree";
  // And an in-place restore of the older version hands al nothing of the secret.
  std::string out;
  fs::remove(docs_);
  ASSERT_EQ(restore({docs_, "--at", format_time_ns(versions->front().archived_at_ns)}, &out), 0)
      << out;
  EXPECT_EQ(test::read_file(docs_ + "/f1"), "al's first");
  EXPECT_EQ(test::read_file(secret_dir + "/f1"), "root only");
}

}  // namespace
}  // namespace tw::archive
