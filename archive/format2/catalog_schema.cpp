// The schema of format 2's catalog and its upgrades (catalog_schema.hpp).
#include "archive/format2/catalog_schema.hpp"

#include <sqlite3.h>

#include <fmt/format.h>

#include "common/escape.hpp"
#include "common/paths.hpp"

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
constexpr const char* kSetVersion = "PRAGMA user_version = 3;";
static_assert(kCatalogSchema == 3, "kSetVersion names the version");

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

Status exec_all(sqlite::Database& db, std::initializer_list<const char*> sql) {
  for (const char* one : sql) {
    if (auto s = db.exec(one); !s) return s;
  }
  return Ok{};
}

// Schema 2 to 3, inside the opening writer's transaction.
Status upgrade_from_2(sqlite::Database& db) { return exec_all(db, {kUpgrade2, kSetVersion}); }

// Schema 1's tree rows (id, parent, whole path) copied into schema 2's nodes (id, parent,
// last component). Both statements are reset when it returns, before their tables change.
Status copy_tree_from_1(sqlite::Database& db) {
  auto from = db.statement("SELECT id, parent, path FROM nodes_1");
  if (!from) return Error{from.error()};
  auto into = db.statement("INSERT INTO nodes(id, parent, name) VALUES (?1, ?2, ?3)");
  if (!into) return Error{into.error()};
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
    if (sqlite3_step(*into) != SQLITE_DONE) return Error{db.failure("upgrading the tree")};
  }
  if (rc != SQLITE_DONE) return Error{db.failure("reading the tree to upgrade")};
  return Ok{};
}

// Schema 1 to 3, inside the opening writer's transaction: node ids are kept, so versions
// stay as they are; a node's name is the last component of its old path. Foreign keys are
// checked once the tables are swapped.
Status upgrade_from_1(sqlite::Database& db) {
  if (auto s =
          exec_all(db, {"PRAGMA legacy_alter_table=ON", kUpgrade1Begin, kNodesTable,
                        kPacksAndBlobsTables, "PRAGMA legacy_alter_table=OFF", kUpgrade1Blobs});
      !s) {
    return s;
  }
  if (auto s = copy_tree_from_1(db); !s) return s;
  db.forget_statements();
  if (auto s = db.exec(kUpgrade1End); !s) return s;
  if (auto s = upgrade_from_2(db); !s) return s;
  auto check = db.statement("PRAGMA foreign_key_check");
  if (!check) return Error{check.error()};
  if (sqlite3_step(*check) != SQLITE_DONE) {
    return Error{db.failure("the upgraded catalog names a node or pack it lacks")};
  }
  return Ok{};
}

Error too_new(const sqlite::Database& db, int version) {
  return Error{fmt::format("catalog {} has schema version {}, newer than this release reads ({})",
                           shown_path(db.file()), version, kCatalogSchema)};
}

// Inside the set-up's transaction: the schema made, or brought up to date.
Status create_or_upgrade(sqlite::Database& db) {
  auto version = db.user_version();
  if (!version) return Error{version.error()};
  if (*version > kCatalogSchema) return too_new(db, *version);
  if (*version == 0) {
    return exec_all(db, {kNodesTable, kVersionsTable, kPacksAndBlobsTables, kSetVersion});
  }
  if (*version == 2) return upgrade_from_2(db);
  if (*version == 1) return upgrade_from_1(db);
  return Ok{};
}

}  // namespace

Status set_up_schema(sqlite::Database& db) {
  // Foreign keys are checked once an upgrade is done, not while its tables are swapped
  // (dropping the old tree would otherwise count as deleting every node).
  if (auto s = db.exec("PRAGMA foreign_keys=OFF"); !s) return s;
  {
    auto transaction = sqlite::Transaction::begin(db);
    if (!transaction) return Error{transaction.error()};
    if (auto s = create_or_upgrade(db); !s) return s;  // rolled back
    if (auto s = transaction->commit(); !s) return s;
  }
  db.forget_statements();
  return db.exec("PRAGMA foreign_keys=ON");
}

Result<int> readable_schema(sqlite::Database& db) {
  // A catalog a writer has created but not yet set up (the archivers start beside the
  // monitor's first look at a new archive) holds nothing yet: refused as such, so that
  // a reader does not fail each look-up with "no such table" instead.
  auto version = db.user_version();
  if (!version) return version;
  if (*version < 1) {
    return Error{fmt::format("catalog {} is not set up yet (a new archive being created)",
                             shown_path(db.file()))};
  }
  if (*version > kCatalogSchema) return too_new(db, *version);
  return version;
}

}  // namespace tw::archive
