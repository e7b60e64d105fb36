// Archives written by earlier releases, made by the scripts in tests/data with those
// releases' timewarp-archiver, read by today's code:
// - format 1 (format1-archive.tar.gz) is listed, restored and verified, and a writer is
//   refused (format 1 is read only);
// - format 2 with its catalog in schema 1 (format2-catalog1-archive.tar.gz) is read as it
//   is when opened read-only, and upgraded in place to schema 3 by the first writer, even
//   under a reader that opened it before;
// - format 2 with its catalog in schema 2 (format2-catalog2-archive.tar.gz) likewise, its
//   versions read as before and the new ones with what their reads saw of the queue.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "archive/format2/catalog.hpp"
#include "archive/format2/catalog_schema.hpp"
#include "archive/sha256.hpp"
#include "archive/store.hpp"
#include "archive_test_util.hpp"
#include "common/version.hpp"

namespace tw::archive {
namespace {

const std::string kSource = "/timewarp-fixture/src";

// Unpacks tests/data/<tarball> into a temporary directory: its archive is archive().
class OldArchive : public ::testing::Test {
 protected:
  void unpack(const std::string& tarball) {
    const std::string command =
        "tar -xzf '" TW_TEST_DATA_DIR "/" + tarball + "' -C '" + dir_.path() + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  std::string archive() const { return dir_ / "archive"; }

  // Restores the fixture's tree as it is now into <dir>/restored and checks what both
  // fixtures hold; returns where it went.
  std::string expect_the_latest_tree(const Store& store) {
    RestoreOptions tree;
    tree.destination = dir_ / "restored";
    std::filesystem::remove_all(tree.destination);
    auto report = store.restore(kSource, tree);
    EXPECT_TRUE(report) << report.error();
    if (report) {
      EXPECT_TRUE(report->problems.empty());
    }
    const std::string out = dir_ / "restored";
    EXPECT_EQ(test::read_file(out + "/notes.txt"), "first version\nsecond version, longer\n");
    EXPECT_EQ(test::read_file(out + "/odd\tname %\xff.txt"), "tab\there");
    EXPECT_EQ(std::filesystem::read_symlink(out + "/link"), "notes.txt");
    EXPECT_EQ(test::read_file(out + "/dir/sub/deep.txt"), "deep\n");
    EXPECT_FALSE(std::filesystem::exists(out + "/dir/gone.txt"));
    return out;
  }

  test::TempDir dir_;
};

class Format1Compat : public OldArchive {
 protected:
  void SetUp() override { unpack("format1-archive.tar.gz"); }
};

class Format2Compat : public OldArchive {
 protected:
  std::size_t large_chunks_ = 2;  // at least, in dir/large.log

  int schema() const {
    auto catalog = Catalog::open(archive() + "/catalog.db", OpenMode::ReadOnly);
    EXPECT_TRUE(catalog) << catalog.error();
    return catalog ? catalog->schema_version() : -1;
  }

  // Everything the old release archived, as it archived it: histories, the tree, the
  // contents (restored), and a clean verify (of `added` more histories).
  void expect_the_old_archive(const Store& store, std::size_t added = 0) {
    auto notes = store.versions(kSource + "/notes.txt");
    ASSERT_TRUE(notes) << notes.error();
    ASSERT_EQ(notes->size(), 2u);
    EXPECT_EQ((*notes)[0].sha256, sha256_hex("first version\n"));
    EXPECT_EQ((*notes)[0].mtime_ns, 1767323045123456789);
    auto gone = store.versions(kSource + "/dir/gone.txt");
    ASSERT_TRUE(gone);
    ASSERT_EQ(gone->size(), 2u);
    EXPECT_FALSE(gone->back().exists());
    auto large = store.versions(kSource + "/dir/large.log");
    ASSERT_TRUE(large);
    ASSERT_EQ(large->size(), 1u);
    EXPECT_GE(large->front().chunks.size(), large_chunks_);
    auto within = store.paths_within(kSource);
    ASSERT_TRUE(within);
    EXPECT_EQ(*within,
              (std::vector<std::string>{kSource, kSource + "/dir", kSource + "/dir/gone.txt",
                                        kSource + "/dir/large.log", kSource + "/dir/sub",
                                        kSource + "/dir/sub/deep.txt", kSource + "/link",
                                        kSource + "/notes.txt", kSource + "/odd\tname %\xff.txt"}));

    const std::string out = expect_the_latest_tree(store);
    EXPECT_EQ(sha256_hex(test::read_file(out + "/dir/large.log")), large->front().sha256);
    EXPECT_EQ(test::read_file(out + "/dir/large.log").size(), 3u << 20);

    const VerifyReport verified = store.verify();
    EXPECT_TRUE(verified.ok());
    EXPECT_EQ(verified.histories, 9u + added);
  }
};

class Format2Catalog1Compat : public Format2Compat {
 protected:
  void SetUp() override { unpack("format2-catalog1-archive.tar.gz"); }
};

class Format2Catalog2Compat : public Format2Compat {
 protected:
  void SetUp() override {
    unpack("format2-catalog2-archive.tar.gz");
    large_chunks_ = 1;  // 3 MiB is one chunk at the chunk sizes of that release
  }
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
  expect_the_latest_tree(*store);

  const VerifyReport verified = store->verify();
  EXPECT_TRUE(verified.ok());
  EXPECT_EQ(verified.histories, 8u);
}

TEST_F(Format1Compat, AWriterIsRefusedAndTheOldArchiveStaysAsItWas) {
  auto store = Store::open(archive(), Store::Mode::ReadWrite);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().find("format-1 archive"), std::string::npos) << store.error();
  EXPECT_EQ(test::read_file(archive() + "/FORMAT"), "timewarp-archive 1\n");
  EXPECT_FALSE(std::filesystem::exists(archive() + "/catalog.db"));
  auto reader = Store::open(archive(), Store::Mode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  EXPECT_TRUE(reader->verify().ok());
}

TEST_F(Format2Catalog1Compat, IsReadAsItIsWhenOpenedReadOnly) {
  ASSERT_EQ(schema(), 1);
  auto store = Store::open(archive(), Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  EXPECT_EQ(store->format(), ArchiveFormat::V2);
  expect_the_old_archive(*store);
  EXPECT_EQ(schema(), 1);
}

TEST_F(Format2Catalog1Compat, IsUpgradedInPlaceByTheFirstWriterAndKeepsEverything) {
  {
    auto store = Store::open(archive(), Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    EXPECT_EQ(schema(), kCatalogSchema);
    expect_the_old_archive(*store);

    // New versions beside the old: a new path in an old folder (its parent found by name
    // in the upgraded tree), a new version of an old path, a new folder.
    const std::string src = dir_ / "src";
    std::filesystem::create_directories(src + "/new dir");
    test::write_file(src + "/new dir/new.txt", "new");
    ASSERT_EQ(store->update(src + "/new dir/new.txt").outcome, Outcome::Complete);
    auto listed = store->paths_within(src);
    ASSERT_TRUE(listed);
    EXPECT_EQ(*listed, (std::vector<std::string>{src, src + "/new dir", src + "/new dir/new.txt"}));
    EXPECT_TRUE(store->verify().ok());
  }
  // Opened again (the upgrade is not run twice) and read-only: the same archive.
  auto again = Store::open(archive(), Store::Mode::ReadWrite);
  ASSERT_TRUE(again) << again.error();
  auto reader = Store::open(archive(), Store::Mode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  expect_the_old_archive(*reader, 1);
  EXPECT_EQ(reader->versions(dir_ / "src/new dir/new.txt")->size(), 1u);
}

// The catalog's `writers` rows: (release, first_ns, last_ns), read with sqlite3 itself.
std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> writers(const std::string& db) {
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> rows;
  sqlite3* handle = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  if (sqlite3_prepare_v2(handle, "SELECT release, first_ns, last_ns FROM writers", -1, &select,
                         nullptr) == SQLITE_OK) {
    while (sqlite3_step(select) == SQLITE_ROW) {
      rows.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(select, 0)),
                        sqlite3_column_int64(select, 1), sqlite3_column_int64(select, 2));
    }
  }
  sqlite3_finalize(select);
  sqlite3_close(handle);
  return rows;
}

TEST_F(Format2Catalog1Compat, RecordsEachReleaseThatWritesToIt) {
  const std::string db = archive() + "/catalog.db";
  ASSERT_TRUE(Store::open(archive(), Store::Mode::ReadOnly));
  EXPECT_TRUE(writers(db).empty());  // the old release kept no such record; a reader adds none
  ASSERT_TRUE(Store::open(archive(), Store::Mode::ReadWrite));
  auto first = writers(db);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(std::get<0>(first[0]), kVersion);
  EXPECT_EQ(std::get<1>(first[0]), std::get<2>(first[0]));
  ASSERT_TRUE(Store::open(archive(), Store::Mode::ReadWrite));
  auto again = writers(db);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(std::get<1>(again[0]), std::get<1>(first[0]));  // first opened: kept
  EXPECT_GE(std::get<2>(again[0]), std::get<2>(first[0]));  // last opened: now
}

TEST_F(Format2Catalog1Compat, AReaderOpenedBeforeTheUpgradeReadsOnAfterIt) {
  auto reader = Catalog::open(archive() + "/catalog.db", OpenMode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  ASSERT_EQ(reader->schema_version(), 1);
  auto before = reader->paths_within(kSource);
  ASSERT_TRUE(before) << before.error();
  auto notes = reader->latest(kSource + "/notes.txt");
  ASSERT_TRUE(notes && *notes);
  auto blob = reader->blob((*notes)->chunks.front());
  ASSERT_TRUE(blob && *blob);

  auto writer = Catalog::open(archive() + "/catalog.db", OpenMode::ReadWrite);
  ASSERT_TRUE(writer) << writer.error();
  ASSERT_EQ(writer->schema_version(), kCatalogSchema);

  // The reader's statements named schema 1's tables: it notices and reads the new schema.
  auto after = reader->paths_within(kSource);
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(*after, *before);
  EXPECT_EQ(reader->schema_version(), kCatalogSchema);
  auto blob_after = reader->blob((*notes)->chunks.front());
  ASSERT_TRUE(blob_after && *blob_after) << (blob_after ? "" : blob_after.error());
  EXPECT_EQ((*blob_after)->pack, (*blob)->pack);
  EXPECT_EQ((*blob_after)->offset, (*blob)->offset);
  auto children = reader->children(kSource + "/dir");
  ASSERT_TRUE(children);
  EXPECT_EQ(*children,
            (std::vector<std::string>{kSource + "/dir/gone.txt", kSource + "/dir/large.log",
                                      kSource + "/dir/sub"}));
  auto all = reader->all_blobs();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 8u);
  EXPECT_EQ(reader->archived_paths()->size(), 9u);
}

TEST_F(Format2Catalog2Compat, IsReadAsItIsWhenOpenedReadOnly) {
  ASSERT_EQ(schema(), 2);
  auto store = Store::open(archive(), Store::Mode::ReadOnly);
  ASSERT_TRUE(store) << store.error();
  expect_the_old_archive(*store);
  EXPECT_EQ(schema(), 2);
}

TEST_F(Format2Catalog2Compat, AReaderOpenedBeforeTheUpgradeReadsOnAfterIt) {
  auto reader = Catalog::open(archive() + "/catalog.db", OpenMode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  ASSERT_EQ(reader->schema_version(), 2);
  auto before = reader->latest(kSource + "/notes.txt");
  ASSERT_TRUE(before && *before);

  auto writer = Catalog::open(archive() + "/catalog.db", OpenMode::ReadWrite);
  ASSERT_TRUE(writer) << writer.error();
  ASSERT_EQ(writer->schema_version(), kCatalogSchema);

  // Its statements still work on the table with one more column: it reads on as schema 2.
  auto after = reader->latest(kSource + "/notes.txt");
  ASSERT_TRUE(after && *after) << (after ? "" : after.error());
  EXPECT_EQ((*after)->sha256, (*before)->sha256);
  EXPECT_EQ((*after)->number, (*before)->number);
  EXPECT_EQ((*after)->read_after, 0);
  auto within = reader->paths_within(kSource);
  ASSERT_TRUE(within) << within.error();
  EXPECT_EQ(within->size(), 9u);
}

TEST_F(Format2Catalog2Compat, IsUpgradedInPlaceByTheFirstWriterAndKeepsEverything) {
  {
    auto store = Store::open(archive(), Store::Mode::ReadWrite);
    ASSERT_TRUE(store) << store.error();
    EXPECT_EQ(schema(), kCatalogSchema);
    expect_the_old_archive(*store);
    // The old versions read nothing of the queue; a new one records its request's horizon.
    EXPECT_EQ(store->versions(kSource + "/notes.txt")->back().read_after, 0);
    const std::string src = dir_ / "src";
    std::filesystem::create_directories(src);
    test::write_file(src + "/new.txt", "new");
    ASSERT_EQ(store->update(src + "/new.txt", QueueOrder{5, 7}).outcome, Outcome::Complete);
    ASSERT_TRUE(store->flush().ok());
  }
  auto reader = Store::open(archive(), Store::Mode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  expect_the_old_archive(*reader, 1);
  auto added = reader->versions(dir_ / "src/new.txt");
  ASSERT_TRUE(added && added->size() == 1u);
  EXPECT_EQ(added->front().read_after, 7);
}

}  // namespace
}  // namespace tw::archive
