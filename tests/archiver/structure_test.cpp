// Format 2's verify and restore on a catalog whose tree was damaged, as a broken disk or
// another tool editing catalog.db with SQL would leave it (FORMAT.md, "Verify" and
// "Restore"): a directory's or a file's node row deleted, a loop of parents, a row with no
// parent, names that cannot be a file's. Verify names each part no path reaches, once, and
// counts the blobs its versions name as used; a restore of the folder names what it cannot
// place instead of leaving it out silently.
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "archive/format2/sqlite.hpp"
#include "archive/sha256.hpp"
#include "archive/store.hpp"
#include "archive_test_util.hpp"
#include "common/escape.hpp"

namespace tw::archive {
namespace {

using test::TempDir;
using test::write_file;

std::string lines(const std::vector<std::string>& problems) {
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  return all;
}

std::string hex(const std::string& bytes) {
  std::string out;
  for (const unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

class StructureTest : public ::testing::Test {
 protected:
  // <tree>/kept, <tree>/inner/leaf1, <tree>/inner/leaf2: each file of its own content, so
  // that each blob has one user; the folders archived too.
  void SetUp() override {
    write_file(tree_ + "/kept", "the kept file");
    write_file(tree_ + "/inner/leaf1", "the first leaf");
    write_file(tree_ + "/inner/leaf2", "the second leaf");
    {
      auto store = Store::open(archive_, Store::Mode::ReadWrite);
      ASSERT_TRUE(store) << store.error();
      for (const auto& p : {tree_ + "/kept", tree_ + "/inner/leaf1", tree_ + "/inner/leaf2",
                            tree_ + "/inner", tree_}) {
        ASSERT_EQ(store->update(p).outcome, Outcome::Complete) << p;
      }
    }
    open_store();
    const VerifyReport report = store_->verify();
    ASSERT_TRUE(report.ok()) << lines(report.problems);
    ASSERT_EQ(report.unreferenced_objects, 0u);
    inner_ = node("inner");
    leaf1_ = node("leaf1");
    leaf2_ = node("leaf2");
  }

  void open_store() {
    auto opened = Store::open(archive_, Store::Mode::ReadOnly);
    ASSERT_TRUE(opened) << opened.error();
    store_.emplace(std::move(*opened));
  }

  // Runs `sql` on the catalog as another tool would, the store closed meanwhile.
  void damage(const std::string& sql) {
    store_.reset();
    {
      auto db = sqlite::Database::open(archive_ + "/catalog.db", true);
      ASSERT_TRUE(db) << db.error();
      ASSERT_TRUE(db->exec(sql.c_str())) << sql;
    }
    open_store();
  }

  // The id of the row named `name` (each name is once in the test's tree).
  std::int64_t node(const std::string& name) {
    auto db = sqlite::Database::open(archive_ + "/catalog.db", false);
    EXPECT_TRUE(db) << db.error();
    auto s = db->statement("SELECT id FROM nodes WHERE name = ?1");
    EXPECT_TRUE(s) << s.error();
    sqlite::bind_bytes(*s, 1, name);
    EXPECT_EQ(sqlite3_step(*s), SQLITE_ROW) << name;
    return sqlite3_column_int64(*s, 0);
  }

  // Verifies: the problems, one per line; the report in `*report`.
  std::string verify(VerifyReport* report) {
    *report = store_->verify();
    return lines(report->problems);
  }

  // Verify names the damage once, in a line holding `named`, and counts no blob as
  // unreferenced; a restore of the tree, when `files` is given, restores that many files and
  // names the damage too, in its one problem (kept in `said_`).
  VerifyReport expect_named(const std::string& named, std::optional<std::uint64_t> files) {
    VerifyReport report;
    const std::string found = verify(&report);
    EXPECT_NE(found.find(named), std::string::npos) << found;
    EXPECT_EQ(report.problems.size(), 1u) << found;
    EXPECT_EQ(report.unreferenced_objects, 0u) << "the versions there still use their blobs";
    if (files) {
      const RestoreReport restored = restore();
      EXPECT_EQ(restored.files, *files);
      said_ = lines(restored.problems);
      EXPECT_NE(said_.find(named), std::string::npos) << said_;
      EXPECT_EQ(restored.problems.size(), 1u) << said_;
    }
    return report;
  }

  // Restores `path` (default: the tree) to a new destination.
  RestoreReport restore(const std::string& path = {}) {
    RestoreOptions options;
    options.destination = dir_ / ("out" + std::to_string(++restores_));
    auto report = store_->restore(path.empty() ? tree_ : path, options);
    EXPECT_TRUE(report) << report.error();
    return report ? *report : RestoreReport{};
  }

  TempDir dir_;
  std::string archive_ = dir_ / "archive";
  std::string tree_ = dir_ / "src/tree";
  std::optional<Store> store_;
  std::int64_t inner_ = 0, leaf1_ = 0, leaf2_ = 0;
  int restores_ = 0;
  std::string said_;
};

TEST_F(StructureTest, ADeletedDirectoryRowIsNamedOnceAndItsBlobsStayUsed) {
  damage("DELETE FROM nodes WHERE name = CAST('inner' AS BLOB)");
  // A restore of the folder restores what it reaches and names what it cannot place.
  expect_named(fmt::format("lost directory node: node {} has no row; 3 archived paths at or "
                           "beneath it cannot be listed or restored (first: <node {}>)",
                           inner_, inner_),
               1);
  EXPECT_NE(said_.find("it may belong beneath " + shown_path(tree_)), std::string::npos) << said_;
  // A file's restore is not the folder's: nothing lost can lie beneath a file.
  const RestoreReport one = restore(tree_ + "/kept");
  EXPECT_EQ(one.files, 1u);
  EXPECT_TRUE(one.problems.empty()) << lines(one.problems);
}

// A blob that versions in a lost part name is theirs: when it is missing, they are named.
TEST_F(StructureTest, TheVersionsOfALostPartAreTheUsersOfItsBlobs) {
  damage(fmt::format("DELETE FROM nodes WHERE id = {}; DELETE FROM blobs WHERE id = x'{}'", inner_,
                     sha256_hex("the first leaf")));
  VerifyReport report;
  const std::string found = verify(&report);
  EXPECT_NE(found.find(fmt::format("missing blob {}; used by <node {}>/leaf1 v1",
                                   sha256_hex("the first leaf"), inner_)),
            std::string::npos)
      << found;
  EXPECT_EQ(report.problems.size(), 2u) << found;
}

TEST_F(StructureTest, ADeletedFileRowIsNamedAndItsBlobStaysUsed) {
  damage(fmt::format("DELETE FROM nodes WHERE id = {}", leaf2_));
  expect_named(fmt::format("lost node: node {} has no row; 1 archived path at or beneath it "
                           "cannot be listed or restored (first: <node {}>)",
                           leaf2_, leaf2_),
               2);
}

TEST_F(StructureTest, ALoopOfParentsIsNamed) {
  damage(fmt::format("UPDATE nodes SET parent = {} WHERE id = {}", leaf1_, inner_));
  // (A restore does not walk the whole tree, which finding a loop takes: FORMAT.md, "Restore".)
  expect_named(fmt::format("lost directory node: node {} is its own ancestor (its parents loop "
                           "without reaching the root); 3 archived paths at or beneath it",
                           std::min(inner_, leaf1_)),
               std::nullopt);
}

TEST_F(StructureTest, ARowWithNoParentIsNamed) {
  damage(fmt::format("UPDATE nodes SET parent = NULL WHERE id = {}", inner_));
  expect_named(fmt::format("lost directory node: node {} (named \"inner\") has no parent and is "
                           "not the root; 3 archived paths",
                           inner_),
               1);
}

// A row no path reaches is named even with nothing archived at or beneath it: verify may
// not take an unchanged tree's walk as proof when that walk did not reach every row.
TEST_F(StructureTest, AnEmptyRowWithNoParentIsNamed) {
  damage("INSERT INTO nodes(parent, name) VALUES (NULL, CAST('stray' AS BLOB))");
  VerifyReport report;
  const std::string found = verify(&report);
  EXPECT_NE(found.find("(named \"stray\") has no parent and is not the root"), std::string::npos)
      << found;
  EXPECT_EQ(report.problems.size(), 1u) << found;
}

// A name stored as text is never found by a look-up by path, which compares bytes.
TEST_F(StructureTest, ANameStoredAsTextIsNamed) {
  damage(fmt::format("UPDATE nodes SET name = 'leaf3' WHERE id = {}", leaf1_));
  expect_named(fmt::format("{} holds an entry named \"leaf3\" (node {}), stored as text",
                           shown_path(tree_ + "/inner"), leaf1_),
               2);
}

class BadNameTest : public StructureTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(BadNameTest, IsNamedByVerifyAndByRestore) {
  const std::string name = GetParam();
  damage(fmt::format("UPDATE nodes SET name = x'{}' WHERE id = {}", hex(name), leaf1_));
  const VerifyReport report = expect_named(
      fmt::format("{} holds an entry named \"{}\" (node {}), which cannot be a file name; 1 "
                  "archived path at or beneath it cannot be listed or restored",
                  shown_path(tree_ + "/inner"), shown_path(name), leaf1_),
      2);
  EXPECT_EQ(report.histories, 4u) << "no path is made of a name that is not a file's";
}

INSTANTIATE_TEST_SUITE_P(Names, BadNameTest,
                         ::testing::Values("a/b", "..", ".", "", "/abs", std::string("a\0b", 3)),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return "Name" + std::to_string(param.index);
                         });

}  // namespace
}  // namespace tw::archive
