// Store::verify names damaged objects and histories, and the versions that use them.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "archive_test_util.hpp"
#include "archiver/sha256.hpp"
#include "archiver/store.hpp"

namespace tw::archive {
namespace {

using test::TempDir;
using test::write_file;

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::open(dir_ / "archive", Store::Mode::ReadWrite);
    ASSERT_TRUE(opened) << opened.error();
    store_.emplace(std::move(opened.value()));
    std::string content;
    for (int i = 0; i < 20000; ++i) content += std::to_string(i * 7919) + " ";
    write_file(dir_ / "src/a", content);
    write_file(dir_ / "src/b", content);  // same content: one object, two users
    write_file(dir_ / "src/c", "other");
    for (const char* name : {"src/a", "src/b", "src/c"}) {
      ASSERT_EQ(store_->update(dir_ / name).outcome, Outcome::Complete);
    }
    digest_ = sha256_hex(content);
    object_ = dir_ / ("archive/objects/" + digest_.substr(0, 2) + "/" + digest_ + ".zst");
    ASSERT_TRUE(std::filesystem::exists(object_));
    ASSERT_TRUE(store_->verify().ok());
  }

  std::string problems() {
    const VerifyReport report = store_->verify();
    std::string all;
    for (const auto& p : report.problems) all += p + "\n";
    return all;
  }

  TempDir dir_;
  std::optional<Store> store_;
  std::string digest_;
  std::string object_;
};

TEST_F(VerifyTest, SoundArchivePasses) {
  const VerifyReport report = store_->verify();
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.objects, 2u);
  EXPECT_EQ(report.histories, 3u);
  EXPECT_EQ(report.versions, 3u);
}

TEST_F(VerifyTest, FlippedByteInAnObjectIsNamedWithItsUsers) {
  const auto size = std::filesystem::file_size(object_);
  const int fd = ::open(object_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char byte = 0;
  ASSERT_EQ(::pread(fd, &byte, 1, static_cast<off_t>(size / 2)), 1);
  byte = static_cast<char>(byte ^ 0x10);
  ASSERT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(size / 2)), 1);
  ::close(fd);
  const std::string found = problems();
  EXPECT_NE(found.find("damaged object " + digest_), std::string::npos) << found;
  EXPECT_NE(found.find(dir_ / "src/a v1"), std::string::npos) << found;
  EXPECT_NE(found.find(dir_ / "src/b v1"), std::string::npos) << found;
  EXPECT_EQ(found.find(dir_ / "src/c"), std::string::npos) << found;
  // A restore of it fails rather than writing wrong bytes.
  RestoreOptions options;
  options.destination = dir_ / "restored";
  EXPECT_FALSE(store_->restore(dir_ / "src/a", options));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "restored"));
}

TEST_F(VerifyTest, TruncatedObjectIsNamed) {
  std::filesystem::resize_file(object_, std::filesystem::file_size(object_) - 5);
  const std::string found = problems();
  EXPECT_NE(found.find("damaged object " + digest_), std::string::npos) << found;
  EXPECT_NE(found.find("truncated"), std::string::npos) << found;
}

TEST_F(VerifyTest, EmptiedAndMissingObjectsAreNamed) {
  std::filesystem::resize_file(object_, 0);
  EXPECT_NE(problems().find("damaged object " + digest_), std::string::npos);
  std::filesystem::remove(object_);
  const std::string found = problems();
  EXPECT_NE(found.find("missing object " + digest_), std::string::npos) << found;
  EXPECT_NE(found.find(dir_ / "src/a v1"), std::string::npos) << found;
}

TEST_F(VerifyTest, DamagedHistoryIsNamed) {
  std::string history;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_ / "archive/nodes")) {
    if (entry.path().extension() == ".history" &&
        test::read_file(entry.path()).find("src/c") != std::string::npos) {
      history = entry.path();
    }
  }
  ASSERT_FALSE(history.empty());
  std::string text = test::read_file(history);
  text[text.find("size=5")] = 'S';
  write_file(history, text);
  const std::string found = problems();
  EXPECT_NE(found.find("damaged history"), std::string::npos) << found;
  EXPECT_NE(found.find("checksum mismatch"), std::string::npos) << found;
}

class VerifyStructureTest : public VerifyTest {
 protected:
  // <archive>/nodes/<kk>/<key> of a raw path.
  std::string node(const std::string& path) {
    const std::string key = sha256_hex(path);
    return (dir_ / "archive/nodes") + "/" + key.substr(0, 2) + "/" + key;
  }
  void archive_tree() {
    write_file(dir_ / "src/d/x", "x");
    write_file(dir_ / "src/d/sub/y", "y");
    for (const char* name : {"src/d", "src/d/x", "src/d/sub", "src/d/sub/y"}) {
      ASSERT_EQ(store_->update(dir_ / name).outcome, Outcome::Complete);
    }
    ASSERT_TRUE(store_->verify().ok());
  }
  std::size_t restored_files() {
    RestoreOptions options;
    options.destination = dir_ / ("out" + std::to_string(++restores_));
    auto report = store_->restore(dir_ / "src/d", options);
    if (report) last_problems_ = report->problems.size();
    return report ? report->files : 0;
  }
  int restores_ = 0;
  std::size_t last_problems_ = 0;
};

TEST_F(VerifyStructureTest, ALostHistoryIsNamed) {
  archive_tree();
  ASSERT_TRUE(std::filesystem::remove(node(dir_ / "src/d/x") + ".history"));
  const std::string found = problems();
  EXPECT_NE(found.find("lost history"), std::string::npos) << found;
  EXPECT_NE(found.find(dir_ / "src/d"), std::string::npos) << found;
  EXPECT_EQ(restored_files(), 1u);
  EXPECT_EQ(last_problems_, 1u) << "a directory restore must not drop a file silently";
}

TEST_F(VerifyStructureTest, ALostDirectoryNodeIsNamed) {
  archive_tree();
  ASSERT_TRUE(std::filesystem::remove(node(dir_ / "src/d/sub") + ".history"));
  const std::string found = problems();
  EXPECT_NE(found.find("lost directory node: " + (dir_ / "src/d/sub")),
            std::string::npos)
      << found;
  EXPECT_EQ(restored_files(), 1u);
  EXPECT_EQ(last_problems_, 1u) << "a directory restore must not drop a subtree silently";
}

TEST_F(VerifyStructureTest, ALostChildMarkerIsNamed) {
  archive_tree();
  const std::string marker =
      node(dir_ / "src/d") + ".children/" + sha256_hex((dir_ / "src/d/x"));
  ASSERT_TRUE(std::filesystem::remove(marker));
  const std::string found = problems();
  EXPECT_NE(found.find("lost child marker: " + (dir_ / "src/d/x")), std::string::npos)
      << found;
}

TEST_F(VerifyStructureTest, AnInterruptedFirstArchivingIsNotDamage) {
  archive_tree();
  // What a kill between the pending marker and the history leaves.
  const std::string ghost = (dir_ / "src/d/ghost");
  std::ofstream(node(dir_ / "src/d") + ".children/" + sha256_hex(ghost) + ".pending").put('\n');
  const VerifyReport report = store_->verify();
  EXPECT_TRUE(report.ok()) << problems();
  EXPECT_EQ(restored_files(), 2u);
  EXPECT_EQ(last_problems_, 0u);
}

}  // namespace
}  // namespace tw::archive
