// Store::verify names damaged content and histories, and the versions that use them: format
// 1's objects, histories and node tree (archives made by a test writer, format 1 being read
// only), and format 2's packs and catalog.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "archive/layout.hpp"
#include "archive/sha256.hpp"
#include "archive/store.hpp"
#include "archive_test_util.hpp"
#include "common/escape.hpp"
#include "format1_writer.hpp"

namespace tw::archive {
namespace {

using test::TempDir;
using test::write_file;

// The uses verify gathers: told in the order they were added, whatever the order of the
// ids; ids that are not a digest's hex form (a damaged history's) kept apart, as they are.
TEST(ContentUsers, TellsEachIdsUsesInOrderAndWhatIsLeft) {
  const std::string a = sha256_hex("a"), b = sha256_hex("b"), c = sha256_hex("c");
  ContentUsers users;
  users.begin_path("/x");
  users.add(b, 1);
  users.add(a, 2);
  users.begin_path("/y");
  users.add(b, 7);
  users.add("not-a-digest", 3);
  for (int i = 0; i < 25; ++i) users.add(c, static_cast<std::uint64_t>(i + 1));
  EXPECT_EQ(users.text(b), "used by /x v1, /y v7");
  EXPECT_EQ(users.text("not-a-digest"), "used by /y v3");
  EXPECT_EQ(users.text(sha256_hex("d")), "used by no version");
  EXPECT_NE(users.text(c).find("/y v20 and 5 more"), std::string::npos) << users.text(c);
  const auto sorted = [](std::vector<std::string> ids) {
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  EXPECT_EQ(users.ids(), sorted({a, b, c, "not-a-digest"}));
  EXPECT_TRUE(users.erase(b));
  EXPECT_FALSE(users.erase(b));  // once
  EXPECT_FALSE(users.erase(sha256_hex("d")));
  EXPECT_FALSE(users.erase("other"));
  EXPECT_TRUE(users.erase("not-a-digest"));
  EXPECT_EQ(users.text(b), "used by no version");
  users.begin_path("/z");  // added after a look-up: merged in
  users.add(a, 4);
  EXPECT_EQ(users.text(a), "used by /x v2, /z v4");
  EXPECT_EQ(users.ids(), sorted({a, c}));
}

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (format_ == ArchiveFormat::V1) {
      writer_.emplace(dir_ / "archive");
    } else {
      auto opened = Store::open(dir_ / "archive", Store::Mode::ReadWrite);
      ASSERT_TRUE(opened) << opened.error();
      store_.emplace(std::move(opened.value()));
    }
    std::string content;
    for (int i = 0; i < 20000; ++i) content += std::to_string(i * 7919) + " ";
    write_file(dir_ / "src/a", content);
    write_file(dir_ / "src/b", content);  // same content: one object, two users
    write_file(dir_ / "src/c", "other");
    for (const char* name : {"src/a", "src/b", "src/c"}) archive(dir_ / name);
    digest_ = sha256_hex(content);
    object_ = dir_ / ("archive/objects/" + digest_.substr(0, 2) + "/" + digest_ + ".zst");
    ASSERT_TRUE(format_ == ArchiveFormat::V2 || std::filesystem::exists(object_));
    ASSERT_TRUE(store_->verify().ok());
  }

  // Archives what `path` holds now: format 2 through the store, format 1 (read only) through
  // the test's writer, the store then opened again to read it.
  void archive(const std::string& path) {
    if (!writer_) {
      ASSERT_EQ(store_->update(path).outcome, Outcome::Complete);
      return;
    }
    writer_->update(path);
    auto opened = Store::open(dir_ / "archive", Store::Mode::ReadOnly);
    ASSERT_TRUE(opened) << opened.error();
    store_.emplace(std::move(opened.value()));
  }

  std::string problems() {
    const VerifyReport report = store_->verify();
    std::string all;
    for (const auto& p : report.problems) all += p + "\n";
    return all;
  }

  ArchiveFormat format_ = ArchiveFormat::V1;
  TempDir dir_;
  std::optional<test::Format1Writer> writer_;  // format 1: what writes the archive
  std::optional<Store> store_;
  std::string digest_;
  std::string object_;
};

// Format 2: the same archive in packs and a catalog.
class Verify2Test : public VerifyTest {
 protected:
  Verify2Test() { format_ = ArchiveFormat::V2; }

  // The one pack this store wrote.
  std::string pack() {
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(dir_ / "archive/packs")) {
      if (entry.is_regular_file()) return entry.path().string();
    }
    return {};
  }
};

TEST_F(Verify2Test, SoundArchivePasses) {
  const VerifyReport report = store_->verify();
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.objects, 2u);  // blobs
  EXPECT_EQ(report.histories, 3u);
  EXPECT_EQ(report.versions, 3u);
  EXPECT_EQ(report.unreferenced_objects, 0u);
}

TEST_F(Verify2Test, AFlippedByteInAPackIsNamedWithItsUsers) {
  const std::string file = pack();
  ASSERT_FALSE(file.empty());
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);  // inside the first blob's frame: a's and b's content
    f.put('\x7f');
  }
  const std::string found = problems();
  EXPECT_NE(found.find("damaged blob"), std::string::npos) << found;
  EXPECT_NE(found.find(escape_bytes(dir_ / "src/a") + " v1"), std::string::npos) << found;
  EXPECT_NE(found.find(escape_bytes(dir_ / "src/b") + " v1"), std::string::npos) << found;
  EXPECT_EQ(found.find(escape_bytes(dir_ / "src/c") + " v1"), std::string::npos) << found;
}

// Verify begins reading the blobs back before it walks the histories; a blob indexed after
// it began (an archiver at work beside it) is read back too, and its damage named.
TEST_F(Verify2Test, ABlobIndexedWhileVerifyRunsIsReadBackToo) {
  auto reader = Store::open(dir_ / "archive", Store::Mode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  std::string late;
  for (int i = 0; i < 5000; ++i) late += std::to_string(i * 104729) + ",";
  write_file(dir_ / "src/late", late);
  bool archived = false;
  const VerifyReport report = reader->verify([&](std::string_view line) {
    if (archived || line.find("histories") == std::string_view::npos) return;
    archived = true;  // after the walk of the histories, before the blobs are compared
    archive(dir_ / "src/late");
    std::string newest;
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(dir_ / "archive/packs")) {
      if (entry.is_regular_file() &&
          (newest.empty() || std::filesystem::last_write_time(entry.path()) >=
                                 std::filesystem::last_write_time(newest))) {
        newest = entry.path().string();
      }
    }
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(newest)) - 20);
    f.put('\x7f');  // inside the late file's blob, the last one written
  });
  ASSERT_TRUE(archived);
  std::string found;
  for (const auto& p : report.problems) found += p + "\n";
  EXPECT_NE(found.find("damaged blob " + sha256_hex(late)), std::string::npos) << found;
  EXPECT_EQ(report.objects, 3u) << found;
}

TEST_F(Verify2Test, ATruncatedOrMissingPackIsNamedAndATornTailIsNot) {
  const std::string file = pack();
  const auto size = std::filesystem::file_size(file);
  // A torn tail (a writer killed mid-append) is not damage.
  { std::ofstream(file, std::ios::app | std::ios::binary) << "TWBLOB2"; }
  EXPECT_TRUE(store_->verify().ok()) << problems();
  std::filesystem::resize_file(file, size - 10);
  std::string found = problems();
  EXPECT_NE(found.find("truncated"), std::string::npos) << found;
  EXPECT_NE(found.find(escape_bytes(dir_ / "src/c") + " v1"), std::string::npos) << found;
  std::filesystem::remove(file);
  found = problems();
  EXPECT_NE(found.find("cannot be opened"), std::string::npos) << found;
}

// SQLite's own check of the catalog runs beside the walk of the histories, on a view of its
// own; what it finds is named. Here an index no longer agrees with its table.
TEST_F(Verify2Test, ACatalogWhoseIndexDisagreesWithItsTableIsNamed) {
  store_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "archive/catalog.db").c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db,
                                "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = "
                                "'CREATE INDEX blobs_by_pack ON blobs(offset, pack)' "
                                "WHERE name = 'blobs_by_pack'",
                                nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }
  auto opened = Store::open(dir_ / "archive", Store::Mode::ReadOnly);
  ASSERT_TRUE(opened) << opened.error();
  const VerifyReport report = opened->verify();
  std::string found;
  for (const auto& p : report.problems) found += p + "\n";
  EXPECT_NE(found.find("catalog.db is damaged"), std::string::npos) << found;
  EXPECT_NE(found.find("blobs_by_pack"), std::string::npos) << found;
  EXPECT_EQ(report.histories, 3u);
}

TEST_F(Verify2Test, ACatalogThatIsNotADatabaseIsNamed) {
  store_.reset();
  const std::string catalog = dir_ / "archive/catalog.db";
  std::filesystem::remove(catalog + "-wal");
  std::filesystem::remove(catalog + "-shm");
  { std::ofstream(catalog, std::ios::trunc) << std::string(8192, 'x'); }
  auto opened = Store::open(dir_ / "archive", Store::Mode::ReadOnly);
  if (!opened) {
    EXPECT_NE(opened.error().find("catalog"), std::string::npos) << opened.error();
    return;
  }
  const VerifyReport report = opened->verify();
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.problems.front().find("catalog"), std::string::npos) << report.problems.front();
}

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
      archive(dir_ / name);
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
  EXPECT_NE(found.find("lost directory node: " + (dir_ / "src/d/sub")), std::string::npos) << found;
  EXPECT_EQ(restored_files(), 1u);
  EXPECT_EQ(last_problems_, 1u) << "a directory restore must not drop a subtree silently";
}

TEST_F(VerifyStructureTest, ALostChildMarkerIsNamed) {
  archive_tree();
  const std::string marker = node(dir_ / "src/d") + ".children/" + sha256_hex((dir_ / "src/d/x"));
  ASSERT_TRUE(std::filesystem::remove(marker));
  const std::string found = problems();
  EXPECT_NE(found.find("lost child marker: " + (dir_ / "src/d/x")), std::string::npos) << found;
  // A restore of the folder reaches what the marker linked no more, and says so.
  EXPECT_EQ(restored_files(), 1u);
  EXPECT_EQ(last_problems_, 1u) << "a directory restore must not drop a file silently";
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
