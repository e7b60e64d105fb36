// The schema of format 2's catalog and its upgrades (catalog_schema.hpp).
#include "archive/format2/catalog_schema.hpp"

#include <sqlite3.h>

#include <fmt/format.h>

#include "common/escape.hpp"
#include "common/paths.hpp"
#include "common/time.hpp"
#include "common/version.hpp"

namespace tw::archive {
namespace {

// Digests are stored as their 32 bytes; `chunks` is the concatenation of a file's blob ids,
// NULL when the file is one chunk (its blob is then the content's own digest) or has none.
//
// Version 3 (this release writes it): the tree as (parent, name) rows, the root "/" being
// the row with no parent and an empty name, packs named once in `packs`, and each
// version's `read_after` (NULL: none; FORMAT.md, "Reads that answer later requests").
constexpr const char* kNodesTable = R"sql(
CREATE TABLE nodes(
  id INTEGER PRIMARY KEY,
  parent INTEGER REFERENCES nodes(id),
  name BLOB NOT NULL,
  UNIQUE(parent, name));
)sql";
constexpr const char* kVersionsTable = R"sql(
CREATE TABLE versions(
  node INTEGER NOT NULL REFERENCES nodes(id),
  number INTEGER NOT NULL,
  archived_at INTEGER NOT NULL,
  op TEXT NOT NULL,
  size INTEGER NOT NULL,
  sha256 BLOB,
  mode INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  dev INTEGER NOT NULL,
  ino INTEGER NOT NULL,
  link BLOB,
  moved_from BLOB,
  moved_to BLOB,
  chunks BLOB,
  read_after INTEGER,
  PRIMARY KEY(node, number)) WITHOUT ROWID;
)sql";
constexpr const char* kPacksAndBlobsTables = R"sql(
CREATE TABLE packs(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE);
CREATE TABLE blobs(
  id BLOB PRIMARY KEY,
  pack INTEGER NOT NULL REFERENCES packs(id),
  offset INTEGER NOT NULL,
  stored INTEGER NOT NULL,
  raw INTEGER NOT NULL) WITHOUT ROWID;
)sql";
constexpr const char* kSetVersion3 = "PRAGMA user_version = 3;";

// Version 4 (this release writes it) is version 3 with retention and collection
// (FORMAT.md, "Retention" and "Collection"): each node counts the versions retention removed
// from its history; blobs get row ids (the collection's bitmap is over them), a
// `condemned` mark (the collection that found the blob unnamed) and an index by pack;
// `retention` holds the moments the archive keeps (one row), `pins` the pinned versions,
// `collections` the log of collections, `shred` the packs that held a purged path's blobs
// (rewritten by the next collection whatever their dead share). A new catalog is made as version 3
// and upgraded at once, in the same transaction, so there is one definition of each table.
constexpr const char* kUpgrade3 = R"sql(
ALTER TABLE nodes ADD COLUMN forgotten INTEGER NOT NULL DEFAULT 0;
ALTER TABLE blobs RENAME TO blobs_3;
CREATE TABLE blobs(
  id BLOB PRIMARY KEY,
  pack INTEGER NOT NULL REFERENCES packs(id),
  offset INTEGER NOT NULL,
  stored INTEGER NOT NULL,
  raw INTEGER NOT NULL,
  condemned INTEGER);
INSERT INTO blobs(id, pack, offset, stored, raw) SELECT id, pack, offset, stored, raw FROM blobs_3;
DROP TABLE blobs_3;
CREATE INDEX blobs_by_pack ON blobs(pack, offset);
CREATE TABLE retention(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  from_ns INTEGER NOT NULL,
  instants BLOB NOT NULL);
CREATE TABLE pins(
  node INTEGER NOT NULL REFERENCES nodes(id),
  number INTEGER NOT NULL,
  PRIMARY KEY(node, number)) WITHOUT ROWID;
CREATE TABLE collections(
  id INTEGER PRIMARY KEY,
  started INTEGER NOT NULL,
  finished INTEGER,
  blobs INTEGER,
  condemned INTEGER,
  swept INTEGER,
  swept_bytes INTEGER,
  packs_deleted INTEGER,
  packs_rewritten INTEGER,
  packs_truncated INTEGER,
  bytes_copied INTEGER,
  bytes_reclaimed INTEGER);
CREATE TABLE shred(
  pack INTEGER PRIMARY KEY);
PRAGMA user_version = 4;
)sql";

// Version 5 is version 4 with each folder's own kept moments (FORMAT.md, "Retention"): a
// row per folder that has, or had, a policy of its own; `retention` keeps the archive's.
constexpr const char* kUpgrade4 = R"sql(
CREATE TABLE retention_folders(
  folder BLOB PRIMARY KEY,
  from_ns INTEGER NOT NULL,
  instants BLOB NOT NULL) WITHOUT ROWID;
PRAGMA user_version = 5;
)sql";

// Version 6 is version 5 with shipping (ARCHITECTURE.md, "Object store"): `shipped` has a
// row per pack copied to the pack store, its size then and when (size NULL: a copy begun
// and not yet confirmed, which may be in the store); `unshipped` names the packs dropped
// here that may be in the store, to remove from it; `ship_target` names the store both
// are about. The trigger makes every drop of a
// pack row that may be in the store a removal to do, in the drop's own transaction.
constexpr const char* kUpgrade5 = R"sql(
CREATE TABLE shipped(
  pack INTEGER PRIMARY KEY,
  size INTEGER,
  at_ns INTEGER NOT NULL);
CREATE TABLE unshipped(
  name TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE ship_target(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  store TEXT NOT NULL);
CREATE TRIGGER pack_dropped AFTER DELETE ON packs
  WHEN EXISTS (SELECT 1 FROM shipped WHERE pack = old.id)
BEGIN
  INSERT OR IGNORE INTO unshipped(name) VALUES (old.name);
  DELETE FROM shipped WHERE pack = old.id;
END;
PRAGMA user_version = 6;
)sql";
static_assert(kCatalogSchema == 6, "kUpgrade5 names the version");

// Version 2 (the second release of format 2) is version 3 without `versions.read_after`. It
// is read as it is, and upgraded in place by the first writer: the column is added, NULL in
// every version written before.
constexpr const char* kUpgrade2 = "ALTER TABLE versions ADD COLUMN read_after INTEGER;";

// Version 1 (the first release of format 2) kept every node's whole path, with its own
// index, and each blob's pack by name: nodes(id, path UNIQUE, parent), the index
// nodes_by_parent, versions as above, blobs(id, pack TEXT, offset, stored, raw). It is read
// as it is (a read-only open) and upgraded in place by the first writer (upgrade_from_1):
// the old tables are set aside (legacy_alter_table: `versions` keeps naming `nodes`), the
// new ones made, filled and the old dropped. Node ids stay, so `versions` is untouched.
constexpr const char* kUpgrade1Begin = R"sql(
ALTER TABLE blobs RENAME TO blobs_1;
ALTER TABLE nodes RENAME TO nodes_1;
)sql";
constexpr const char* kUpgrade1Blobs = R"sql(
INSERT INTO packs(name) SELECT DISTINCT pack FROM blobs_1 ORDER BY pack;
INSERT INTO blobs SELECT b.id, p.id, b.offset, b.stored, b.raw FROM blobs_1 b
  JOIN packs p ON p.name = b.pack;
)sql";
constexpr const char* kUpgrade1End = R"sql(
DROP TABLE blobs_1;
DROP TABLE nodes_1;
)sql";

// The releases that wrote to the archive, each with when it first and last opened it to
// write (FORMAT.md, "Catalog"). Outside the schema's version: made by the first writer that
// keeps it, so a release that does not know the table still opens the archive.
constexpr const char* kWritersTable = R"sql(
CREATE TABLE IF NOT EXISTS writers(
  release TEXT PRIMARY KEY,
  first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL) WITHOUT ROWID;
)sql";

// This release, recorded as a writer of the archive now.
Done record_writer(sqlite::Database& db) {
  TRY(db.exec(kWritersTable));
  TRY_ASSIGN(auto insert,
             db.statement("INSERT INTO writers(release, first_ns, last_ns) VALUES (?1, ?2, ?2) "
                          "ON CONFLICT(release) DO UPDATE SET last_ns = excluded.last_ns"));
  sqlite3_bind_text(*insert, 1, kVersion.data(), static_cast<int>(kVersion.size()), SQLITE_STATIC);
  sqlite3_bind_int64(*insert, 2, now_ns());
  if (sqlite3_step(*insert) != SQLITE_DONE) {
    return archive_fault(Error{db.failure("recording this release as a writer")});
  }
  sqlite3_reset(*insert);
  return Ok{};
}

Done exec_all(sqlite::Database& db, std::initializer_list<const char*> sql) {
  for (const char* one : sql) TRY(db.exec(one));
  return Ok{};
}

// Schema 5, 4, 3 and 2 to 6, inside the opening writer's transaction.
Done upgrade_from_5(sqlite::Database& db) { return exec_all(db, {kUpgrade5}); }
Done upgrade_from_4(sqlite::Database& db) { return exec_all(db, {kUpgrade4, kUpgrade5}); }
Done upgrade_from_3(sqlite::Database& db) {
  return exec_all(db, {kUpgrade3, kUpgrade4, kUpgrade5});
}
Done upgrade_from_2(sqlite::Database& db) {
  return exec_all(db, {kUpgrade2, kSetVersion3, kUpgrade3, kUpgrade4, kUpgrade5});
}

// Schema 1's tree rows (id, parent, whole path) copied into schema 2's nodes (id, parent,
// last component). Both statements are reset when it returns, before their tables change.
Done copy_tree_from_1(sqlite::Database& db) {
  TRY_ASSIGN(auto from, db.statement("SELECT id, parent, path FROM nodes_1"));
  TRY_ASSIGN(auto into, db.statement("INSERT INTO nodes(id, parent, name) VALUES (?1, ?2, ?3)"));
  int rc;
  while ((rc = sqlite3_step(*from)) == SQLITE_ROW) {
    sqlite3_reset(*into);
    sqlite3_bind_int64(*into, 1, sqlite3_column_int64(*from, 0));
    if (sqlite3_column_type(*from, 1) == SQLITE_NULL) {
      sqlite3_bind_null(*into, 2);
    } else {
      sqlite3_bind_int64(*into, 2, sqlite3_column_int64(*from, 1));
    }
    sqlite::bind_bytes(*into, 3, base_name(sqlite::column_bytes(*from, 2)));
    if (sqlite3_step(*into) != SQLITE_DONE) {
      return archive_fault(Error{db.failure("upgrading the tree")});
    }
  }
  if (rc != SQLITE_DONE) return archive_fault(Error{db.failure("reading the tree to upgrade")});
  return Ok{};
}

// Schema 1 to 6, inside the opening writer's transaction: node ids are kept, so versions
// stay as they are; a node's name is the last component of its old path. Foreign keys are
// checked once the tables are swapped.
Done upgrade_from_1(sqlite::Database& db) {
  TRY(exec_all(db, {"PRAGMA legacy_alter_table=ON", kUpgrade1Begin, kNodesTable,
                    kPacksAndBlobsTables, "PRAGMA legacy_alter_table=OFF", kUpgrade1Blobs}));
  TRY(copy_tree_from_1(db));
  db.forget_statements();
  TRY(db.exec(kUpgrade1End));
  TRY(upgrade_from_2(db));
  TRY_ASSIGN(auto check, db.statement("PRAGMA foreign_key_check"));
  if (sqlite3_step(*check) != SQLITE_DONE) {
    return archive_fault(Error{db.failure("the upgraded catalog names a node or pack it lacks")});
  }
  return Ok{};
}

Fault too_new(const sqlite::Database& db, int version) {
  return archive_fault(
      Error{fmt::format("catalog {} has schema version {}, newer than this release reads ({})",
                        shown_path(db.file()), version, kCatalogSchema)});
}

// Inside the set-up's transaction: the schema made, or brought up to date.
Done create_or_upgrade(sqlite::Database& db) {
  TRY_ASSIGN(const int version, db.user_version());
  if (version > kCatalogSchema) return too_new(db, version);
  if (version == 0) {
    return exec_all(db, {kNodesTable, kVersionsTable, kPacksAndBlobsTables, kSetVersion3, kUpgrade3,
                         kUpgrade4, kUpgrade5});
  }
  if (version == 5) return upgrade_from_5(db);
  if (version == 4) return upgrade_from_4(db);
  if (version == 3) return upgrade_from_3(db);
  if (version == 2) return upgrade_from_2(db);
  if (version == 1) return upgrade_from_1(db);
  return Ok{};
}

// A catalog made before schema 4 has no auto-vacuum: it is rewritten once (VACUUM, which
// takes the catalog alone for as long as it lasts: a second or so per 100 MB) so that
// collections can shrink it from then on.
Done convert_to_incremental_vacuum(sqlite::Database& db) {
  TRY_ASSIGN(auto mode, db.statement("PRAGMA auto_vacuum"));
  if (sqlite3_step(*mode) != SQLITE_ROW) {
    return archive_fault(Error{db.failure("reading auto_vacuum")});
  }
  const bool incremental = sqlite3_column_int(*mode, 0) == 2;
  sqlite3_reset(*mode);
  if (incremental) return Ok{};
  TRY(db.exec("PRAGMA auto_vacuum=INCREMENTAL"));
  return db.exec("VACUUM");
}

}  // namespace

Done set_up_schema(sqlite::Database& db) {
  // Foreign keys are checked once an upgrade is done, not while its tables are swapped
  // (dropping the old tree would otherwise count as deleting every node).
  TRY(db.exec("PRAGMA foreign_keys=OFF"));
  // A new catalog gives the pages rows no longer use back to the filesystem when a
  // collection asks (incremental auto-vacuum: set before its first table; no effect on a
  // catalog that has tables, which is converted below).
  TRY(db.exec("PRAGMA auto_vacuum=INCREMENTAL"));
  {
    TRY_ASSIGN(auto transaction, sqlite::Transaction::begin(db));
    TRY(create_or_upgrade(db));  // rolled back
    TRY(record_writer(db));
    TRY(transaction.commit());
  }
  db.forget_statements();
  TRY(db.exec("PRAGMA foreign_keys=ON"));
  return convert_to_incremental_vacuum(db);
}

Fault not_set_up(const std::string& file) {
  return archive_fault(Error{
      fmt::format("catalog {} is not set up yet (a new archive being created)", shown_path(file))});
}

Expected<int> readable_schema(sqlite::Database& db) {
  // A catalog a writer has created but not yet set up (the archivers start beside the
  // monitor's first look at a new archive) holds nothing yet: refused as such, so that
  // a reader does not fail each look-up with "no such table" instead.
  TRY_ASSIGN(const int version, db.user_version());
  if (version < 1) return not_set_up(db.file());
  if (version > kCatalogSchema) return too_new(db, version);
  return version;
}

}  // namespace tw::archive
