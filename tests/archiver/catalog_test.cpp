// The format-2 catalog (archiver/catalog.hpp): histories, the tree and the blob index read
// back as committed, a batch commits whole or not at all, two processes' catalogs see each
// other's commits, and the latest version is one look-up however long the history.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "archive/format2/catalog.hpp"
#include "archive/format2/catalog_schema.hpp"
#include "archive/format2/sqlite.hpp"
#include "archive/sha256.hpp"
#include "archive_test_util.hpp"

namespace tw::archive {
namespace {

Version file_version(std::uint64_t number, const std::string& content) {
  Version out;
  out.number = number;
  out.archived_at_ns = 1'000'000'000LL * static_cast<std::int64_t>(number);
  out.op = Op::Update;
  out.size = content.size();
  out.sha256 = sha256_hex(content);
  out.mode = 0100644;
  out.uid = 1000;
  out.gid = 100;
  out.mtime_ns = -1'500'000'001;  // before 1970, with a fraction
  out.dev = 2049;
  out.ino = 77;
  out.chunks = {sha256_hex(content + "a"), sha256_hex(content + "b")};
  return out;
}

// Adds file version `v` of `path` to `batch` with a blob for each chunk it names: a commit
// takes only versions whose blobs are in the catalog or the batch (FORMAT.md, "Collection").
void add_file(CatalogBatch& batch, const std::string& path, const Version& v) {
  batch.add_version(path, v);
  for (const auto& id : v.chunks)
    batch.add_blob(id, BlobRef{"ffeeddccbbaa99887766554433221100", 16, 40, 2});
}

Catalog open_catalog(const std::string& file) {
  auto catalog = Catalog::open(file, OpenMode::ReadWrite);
  EXPECT_TRUE(catalog) << catalog.error();
  return std::move(*catalog);
}

TEST(Catalog, VersionsTreeAndBlobsReadBackAsCommitted) {
  test::TempDir dir;
  Catalog catalog = open_catalog(dir / "catalog.db");
  const std::string odd("/src/d\n\t%\xff/f\x01", 13);  // any byte but NUL, raw
  CatalogBatch batch;
  add_file(batch, odd, file_version(1, "one"));
  Version link;
  link.number = 1;
  link.op = Op::Update;
  link.mode = 0120777;
  link.link_target = "../target\n";
  link.size = link.link_target.size();
  batch.add_version("/src/link", link);
  Version moved = file_version(2, "two");
  moved.op = Op::Move;
  moved.moved_from = "/elsewhere/x";
  add_file(batch, odd, moved);
  batch.add_blob(sha256_hex("one"), BlobRef{"00112233445566778899aabbccddeeff", 16, 40, 3});
  EXPECT_EQ(batch.latest(odd)->number, 2u);
  ASSERT_TRUE(catalog.commit(batch));

  auto history = catalog.versions(odd);
  ASSERT_TRUE(history) << history.error();
  ASSERT_EQ(history->size(), 2u);
  const auto expected = file_version(1, "one");
  const Version& v = (*history)[0];
  EXPECT_EQ(v.number, 1u);
  EXPECT_EQ(v.archived_at_ns, expected.archived_at_ns);
  EXPECT_EQ(v.sha256, expected.sha256);
  EXPECT_EQ(v.mode, 0100644u);
  EXPECT_EQ(v.mtime_ns, -1'500'000'001);
  EXPECT_EQ(v.dev, 2049u);
  EXPECT_EQ(v.ino, 77u);
  EXPECT_EQ((*history)[0].chunks, expected.chunks);
  EXPECT_EQ((*history)[1].op, Op::Move);
  EXPECT_EQ((*history)[1].moved_from, "/elsewhere/x");
  auto latest = catalog.latest("/src/link");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->link_target, "../target\n");
  EXPECT_TRUE((*latest)->sha256.empty());
  EXPECT_TRUE((*latest)->chunks.empty());

  auto children = catalog.children("/src");
  ASSERT_TRUE(children);
  EXPECT_EQ(*children, (std::vector<std::string>{std::string("/src/d\n\t%\xff", 10), "/src/link"}));
  auto within = catalog.paths_within("/src");
  ASSERT_TRUE(within);
  EXPECT_EQ(within->size(), 4u);  // /src, its two children and the file beneath one
  EXPECT_TRUE(*catalog.has_children("/src"));
  EXPECT_FALSE(*catalog.has_children("/src/link"));
  EXPECT_FALSE(*catalog.has_children("/nowhere"));
  // Both at once: a parent known only as one, a file with a history, a path never seen.
  for (const auto& [path, latest, beneath] :
       {std::tuple{"/src", false, true}, {"/src/link", true, false}, {"/nowhere", false, false}}) {
    auto state = catalog.path_state(path);
    ASSERT_TRUE(state) << state.error();
    EXPECT_EQ(state->latest.has_value(), latest) << path;
    EXPECT_EQ(state->children, beneath) << path;
  }
  EXPECT_EQ(catalog.path_state("/src/link")->latest->link_target, "../target\n");
  EXPECT_EQ(*catalog.archived_paths(), (std::vector<std::string>{odd, "/src/link"}));
  EXPECT_EQ(*catalog.integrity_problems(), "");
  auto root = catalog.children("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(*root, std::vector<std::string>{"/src"});
  // A sibling whose name begins like the directory's is not within it.
  CatalogBatch sibling;
  add_file(sibling, "/src0/x", file_version(1, "x"));
  add_file(sibling, "/src-other", file_version(1, "y"));
  ASSERT_TRUE(catalog.commit(sibling));
  EXPECT_EQ(catalog.paths_within("/src")->size(), 4u);

  auto blob = catalog.blob(sha256_hex("one"));
  ASSERT_TRUE(blob && *blob);
  EXPECT_EQ((*blob)->pack, "00112233445566778899aabbccddeeff");
  EXPECT_EQ((*blob)->offset, 16u);
  EXPECT_EQ((*blob)->stored, 40u);
  EXPECT_FALSE(*catalog.blob(sha256_hex("none")));
  EXPECT_TRUE(catalog.versions("/never")->empty());
}

TEST(Catalog, ABatchWithATakenNumberCommitsNothing) {
  test::TempDir dir;
  Catalog catalog = open_catalog(dir / "catalog.db");
  CatalogBatch first;
  add_file(first, "/a", file_version(1, "a1"));
  ASSERT_TRUE(catalog.commit(first));
  CatalogBatch clash;
  add_file(clash, "/b", file_version(1, "b1"));
  clash.add_blob(sha256_hex("b1"), BlobRef{"00112233445566778899aabbccddeeff", 16, 40, 2});
  add_file(clash, "/a", file_version(1, "a1 again"));
  auto done = catalog.commit(clash);
  ASSERT_FALSE(done);
  EXPECT_EQ(done.fault().outcome, Outcome::FailedRetry);
  EXPECT_TRUE(catalog.versions("/b")->empty());
  EXPECT_FALSE(*catalog.blob(sha256_hex("b1")));
  EXPECT_EQ(catalog.versions("/a")->size(), 1u);
  // And the catalog still takes the next batch.
  CatalogBatch next;
  add_file(next, "/a", file_version(2, "a2"));
  ASSERT_TRUE(catalog.commit(next));
  EXPECT_EQ(catalog.versions("/a")->size(), 2u);
  // The node and the pack the failed batch added are gone, and so are their ids from what
  // the catalog remembers: a path beneath /b and a blob in the same pack go in anew.
  CatalogBatch beneath;
  add_file(beneath, "/b/c", file_version(1, "c1"));
  beneath.add_blob(sha256_hex("c1"), BlobRef{"00112233445566778899aabbccddeeff", 56, 40, 2});
  auto added = catalog.commit(beneath);
  ASSERT_TRUE(added) << added.fault().message;
  EXPECT_EQ(*catalog.children("/b"), std::vector<std::string>{"/b/c"});
  EXPECT_EQ(*catalog.children("/"), (std::vector<std::string>{"/a", "/b"}));
  ASSERT_TRUE(*catalog.blob(sha256_hex("c1")));
  EXPECT_EQ((*catalog.blob(sha256_hex("c1")))->pack, "00112233445566778899aabbccddeeff");
  EXPECT_EQ(*catalog.integrity_problems(), "");
}

TEST(Catalog, TwoProcessesCommitToOneCatalog) {
  test::TempDir dir;
  const std::string file = dir / "catalog.db";
  { open_catalog(file); }  // created before the writers start
  constexpr int kPerWriter = 200;
  std::vector<pid_t> children;
  for (int w = 0; w < 2; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto catalog = Catalog::open(file, OpenMode::ReadWrite);
      if (!catalog) ::_exit(2);
      for (int i = 1; i <= kPerWriter; ++i) {
        CatalogBatch batch;
        add_file(batch, "/w" + std::to_string(w), file_version(i, std::to_string(i)));
        if (!catalog->commit(batch)) ::_exit(3);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  auto reader = Catalog::open(file, OpenMode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  for (int w = 0; w < 2; ++w) {
    auto latest = reader->latest("/w" + std::to_string(w));
    ASSERT_TRUE(latest && *latest);
    EXPECT_EQ((*latest)->number, static_cast<std::uint64_t>(kPerWriter));
    EXPECT_EQ(reader->versions("/w" + std::to_string(w))->size(), std::size_t{kPerWriter});
  }
}

// A restore reads the histories of a whole tree at once: from one snapshot, so that a
// version committed meanwhile (by an archiver, another process) is in all of them or none.
TEST(Catalog, HistoriesReadTogetherComeFromOneSnapshot) {
  test::TempDir dir;
  const std::string file = dir / "catalog.db";
  Catalog writer = open_catalog(file);
  CatalogBatch first;
  for (const char* path : {"/t/a", "/t/b", "/t/c"}) add_file(first, path, file_version(1, path));
  ASSERT_TRUE(writer.commit(first));
  auto reader = Catalog::open(file, OpenMode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  const std::vector<std::string> paths{"/t/a", "/t/b", "/t/c", "/t/none"};
  std::vector<std::size_t> lengths;
  ASSERT_TRUE(reader->each_history(paths, [&](std::size_t i, Expected<std::vector<Version>> h) {
    EXPECT_TRUE(h) << h.error();
    lengths.push_back(h ? h->size() : 99);
    if (i == 0) {  // after the first history is read, a second version of each
      CatalogBatch second;
      for (const char* path : {"/t/a", "/t/b", "/t/c"}) {
        add_file(second, path, file_version(2, std::string(path) + "2"));
      }
      EXPECT_TRUE(writer.commit(second));
    }
    return true;
  }));
  EXPECT_EQ(lengths, (std::vector<std::size_t>{1, 1, 1, 0}));
  // Read again, every history has the second version; `each` stops the reading.
  lengths.clear();
  ASSERT_TRUE(reader->each_history(paths, [&](std::size_t i, Expected<std::vector<Version>> h) {
    lengths.push_back(h ? h->size() : 99);
    return i < 1;
  }));
  EXPECT_EQ(lengths, (std::vector<std::size_t>{2, 2}));
}

TEST(Catalog, LookUpsBetweenCommitsLeaveNoReadOpenAndTheWalStaysBounded) {
  test::TempDir dir;
  const std::string file = dir / "catalog.db";
  Catalog catalog = open_catalog(file);
  // Each look-up finds a row: a statement left on its row would hold a read transaction
  // open, and no checkpoint could then empty the WAL.
  for (int i = 1; i <= 3000; ++i) {
    CatalogBatch batch;
    add_file(batch, "/one", file_version(i, std::to_string(i)));
    batch.add_blob(sha256_hex(std::to_string(i)),
                   BlobRef{"00112233445566778899aabbccddeeff", 16, 40, 2});
    ASSERT_TRUE(catalog.commit(batch));
    ASSERT_TRUE(*catalog.blob(sha256_hex(std::to_string(i))));
    ASSERT_TRUE(*catalog.latest("/one"));
  }
  struct stat st {};
  ASSERT_EQ(::stat((file + "-wal").c_str(), &st), 0);
  // The automatic checkpoint runs every 1,000 pages (4 MiB); 3,000 commits of two rows
  // each write about 9,000 pages, so a WAL that is never reset is twice the bound.
  EXPECT_LT(st.st_size, 6 << 20);
}

TEST(Catalog, AReadOnlyCatalogThatDoesNotExistIsAnError) {
  test::TempDir dir;
  auto catalog = Catalog::open(dir / "missing.db", OpenMode::ReadOnly);
  ASSERT_FALSE(catalog);
  EXPECT_NE(catalog.error().find("missing.db"), std::string::npos) << catalog.error();
}

TEST(Catalog, AReaderRefusesACatalogNotYetSetUpAndReadsItOnceItIs) {
  test::TempDir dir;
  const std::string file = dir / "catalog.db";
  // What a reader meets while the first writer is between creating the file and its schema.
  { std::ofstream created(file); }
  auto early = Catalog::open(file, OpenMode::ReadOnly);
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().find("not set up yet"), std::string::npos) << early.error();
  Catalog writer = open_catalog(file);
  CatalogBatch batch;
  add_file(batch, "/a", file_version(1, "a"));
  ASSERT_TRUE(writer.commit(batch));
  auto reader = Catalog::open(file, OpenMode::ReadOnly);
  ASSERT_TRUE(reader) << reader.error();
  auto latest = reader->latest("/a");
  ASSERT_TRUE(latest) << latest.error();
  EXPECT_TRUE(*latest);
}

// A catalog whose schema is newer than this release reads is refused, by a reader and by a
// writer, and left as it is.
TEST(Catalog, ASchemaNewerThanThisReleaseIsRefusedAndLeftAsItIs) {
  test::TempDir dir;
  const std::string file = dir / "catalog.db";
  { open_catalog(file); }
  {
    auto db = sqlite::Database::open(file, true);
    ASSERT_TRUE(db) << db.error();
    ASSERT_TRUE(db->exec(fmt::format("PRAGMA user_version = {}", kCatalogSchema + 1).c_str()));
  }
  for (const OpenMode mode : {OpenMode::ReadOnly, OpenMode::ReadWrite}) {
    auto catalog = Catalog::open(file, mode);
    ASSERT_FALSE(catalog);
    EXPECT_NE(
        catalog.error().find(fmt::format("schema version {}, newer than this release reads ({})",
                                         kCatalogSchema + 1, kCatalogSchema)),
        std::string::npos)
        << catalog.error();
  }
  auto db = sqlite::Database::open(file, false);
  ASSERT_TRUE(db) << db.error();
  auto version = db->user_version();
  ASSERT_TRUE(version) << version.error();
  EXPECT_EQ(*version, kCatalogSchema + 1);
}

// The SQLite layer's write transaction is rolled back when it ends before its commit.
TEST(Catalog, AWriteTransactionNotCommittedIsRolledBack) {
  test::TempDir dir;
  auto db = sqlite::Database::open(dir / "t.db", true);
  ASSERT_TRUE(db) << db.error();
  ASSERT_TRUE(db->exec("CREATE TABLE t(x INTEGER)"));
  const auto rows = [&] {
    auto s = db->statement("SELECT count(*) FROM t");
    EXPECT_TRUE(s) << s.error();
    EXPECT_EQ(sqlite3_step(*s), SQLITE_ROW);
    return sqlite3_column_int(*s, 0);
  };
  {
    auto transaction = sqlite::Transaction::begin(*db);
    ASSERT_TRUE(transaction) << transaction.error();
    ASSERT_TRUE(db->exec("INSERT INTO t VALUES (1)"));
    EXPECT_EQ(rows(), 1);
  }
  EXPECT_EQ(rows(), 0);
  {
    auto transaction = sqlite::Transaction::begin(*db);
    ASSERT_TRUE(transaction) << transaction.error();
    ASSERT_TRUE(db->exec("INSERT INTO t VALUES (2)"));
    ASSERT_TRUE(transaction->commit());
  }
  EXPECT_EQ(rows(), 1);
}

// fold_journal() answers false while another connection reads the catalog, once `wait` has
// passed, and empties the journal once none does.
TEST(Catalog, FoldingTheJournalWaitsForReadersNoLongerThanAsked) {
  test::TempDir dir;
  const std::string file = dir / "catalog.db";
  Catalog catalog = open_catalog(file);
  CatalogBatch batch;
  add_file(batch, "/a", file_version(1, "a"));
  ASSERT_TRUE(catalog.commit(batch));
  auto reader = sqlite::Database::open(file, false);
  ASSERT_TRUE(reader) << reader.error();
  {
    auto s = reader->statement("SELECT number FROM versions");
    ASSERT_TRUE(s) << s.error();
    ASSERT_EQ(sqlite3_step(*s), SQLITE_ROW);  // a read, open until `s` is reset
    const auto start = std::chrono::steady_clock::now();
    auto folded = catalog.fold_journal(std::chrono::milliseconds(100));
    ASSERT_TRUE(folded) << folded.error();
    EXPECT_FALSE(*folded);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
  auto folded = catalog.fold_journal(std::chrono::milliseconds(100));
  ASSERT_TRUE(folded) << folded.error();
  EXPECT_TRUE(*folded);
  struct stat st {};
  ASSERT_EQ(::stat((file + "-wal").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(catalog.latest("/a")->value().number, 1u);
}

}  // namespace
}  // namespace tw::archive
