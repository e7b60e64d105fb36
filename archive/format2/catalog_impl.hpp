// The inside of format 2's catalog (catalog.hpp), shared by the files that implement it:
// catalog.cpp (opening, the queries, the commit), catalog_structure.cpp (the tree of paths
// and its damage), catalog_retention.cpp (kept moments, pins, removed versions),
// catalog_collect.cpp (collection) and catalog_space.cpp (bytes used and freed). Internal to
// the catalog.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "archive/format2/catalog.hpp"
#include "archive/format2/catalog_rows.hpp"
#include "archive/format2/catalog_schema.hpp"
#include "archive/format2/checkpointer.hpp"
#include "archive/format2/id_memo.hpp"
#include "archive/format2/sqlite.hpp"
#include "archive/sha256.hpp"
#include "common/escape.hpp"
#include "common/fd.hpp"
#include "common/paths.hpp"

namespace tw::archive {

using sqlite::bind_bytes;
using sqlite::column_bytes;

// What the last walk of the whole tree (archived_paths, catalog_structure.cpp) saw, and of
// which state of the catalog: while nothing changed it, verify's look for lost parts needs
// no walk of its own.
struct TreeSeen {
  std::int64_t data_version = 0;  // PRAGMA data_version: other connections' commits
  std::int64_t own_changes = 0;   // sqlite3_total_changes64: this connection's
  bool whole = false;             // every row, and every history's row, was reached
  std::vector<LostPart> bad;      // the rows reached whose name cannot be a file's
};

struct Catalog::Impl {
  explicit Impl(sqlite::Database opened) : db(std::move(opened)) {}

  std::unique_ptr<Checkpointer> checkpointer;  // writable; outlives db, which calls it
  sqlite::Database db;
  int schema = kCatalogSchema;  // of the file (older only when read, before a writer upgrades it)
  IdMemo node_ids, pack_ids;    // schema 2 and later
  bool writing = false;         // inside commit()'s transaction
  UniqueFd journal;             // writable: catalog.db-wal, for sync_journal()
  std::optional<TreeSeen> tree_seen;

  std::string failure(std::string_view what) const { return db.failure(what); }
  Expected<sqlite::Cursor> statement(std::string_view sql) { return db.statement(sql); }

  // After a read failed: whether a writer has upgraded the catalog since it was opened (its
  // statements then name tables that are gone); if so, reads go on in the new schema.
  bool schema_changed() {
    auto now = db.user_version();
    if (!now || *now == schema || *now < 1 || *now > kCatalogSchema) return false;
    schema = *now;
    db.forget_statements();
    node_ids.forget();
    pack_ids.forget();
    return true;
  }

  // Runs the read `f`, once more if it failed because the schema changed under it.
  template <class F>
  auto read(F&& f) -> decltype(f()) {
    auto result = f();
    if (!result && schema_changed()) result = f();
    return result;
  }

  // Runs `f` inside one read transaction, so that its reads see one snapshot: its own, or,
  // inside a transaction already, that one's.
  template <class F>
  auto in_snapshot(F&& f) -> decltype(f()) {
    const bool own = sqlite3_get_autocommit(db.handle()) != 0;
    if (own) TRY(db.run("BEGIN"));
    Defer end([&] {
      if (own) (void)db.run("COMMIT");
    });
    return f();
  }

  // The node id of `path`, if it is in the tree. Schema 2 walks down from the root, one
  // look-up per component not yet known (a directory's id is kept once looked up).
  Expected<std::optional<std::int64_t>> node_of(std::string_view path) {
    if (schema == 1) {
      TRY_ASSIGN(auto s, statement("SELECT id FROM nodes WHERE path = ?1"));
      bind_bytes(*s, 1, path);
      return optional_id(*s, "looking up a path");
    }
    if (auto id = node_ids.find(path)) return id;
    std::optional<std::int64_t> found;
    if (path == "/") {
      TRY_ASSIGN(auto s, statement("SELECT id FROM nodes WHERE parent IS NULL"));
      TRY_ASSIGN(found, optional_id(*s, "looking up the root"));
    } else {
      TRY_ASSIGN(const std::optional<std::int64_t> parent, node_of(parent_path(path)));
      if (!parent) return parent;
      TRY_ASSIGN(auto s, statement("SELECT id FROM nodes WHERE parent = ?1 AND name = ?2"));
      sqlite3_bind_int64(*s, 1, *parent);
      bind_bytes(*s, 2, base_name(path));
      TRY_ASSIGN(found, optional_id(*s, "looking up a path"));
    }
    // Found by a read inside commit()'s transaction, it may be the transaction's own.
    if (found) node_ids.remember(path, *found, writing);
    return found;
  }

  // Whether any row lies beneath node `node` (one index look-up).
  Expected<bool> any_child(std::int64_t node) {
    TRY_ASSIGN(auto s, statement("SELECT 1 FROM nodes WHERE parent = ?1 LIMIT 1"));
    sqlite3_bind_int64(*s, 1, node);
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return archive_fault(Error{failure("looking up children")});
  }

  Expected<std::optional<std::int64_t>> optional_id(sqlite3_stmt* s, std::string_view what) {
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) return std::optional<std::int64_t>(sqlite3_column_int64(s, 0));
    if (rc == SQLITE_DONE) return std::optional<std::int64_t>();
    return archive_fault(Error{failure(what)});
  }

  // The node id of `path`, adding it and its missing ancestors (inside commit(); schema 2 and
  // later).
  Expected<std::int64_t> ensure_node(const std::string& path) {
    TRY_ASSIGN(const std::optional<std::int64_t> found, node_of(path));
    if (found) return *found;
    std::optional<std::int64_t> parent;
    if (path != "/") {
      TRY_ASSIGN(parent, ensure_node(parent_path(path)));
    }
    TRY_ASSIGN(auto s, statement("INSERT INTO nodes(parent, name) VALUES (?1, ?2)"));
    if (parent) sqlite3_bind_int64(*s, 1, *parent);
    bind_bytes(*s, 2, base_name(path));
    if (sqlite3_step(*s) != SQLITE_DONE) return archive_fault(Error{failure("adding a path")});
    const std::int64_t id = db.last_insert_rowid();
    node_ids.remember(path, id, writing);
    return id;
  }

  // The id of pack `name`, adding it (inside commit(); schema 2 and later).
  Expected<std::int64_t> ensure_pack(std::string_view name) {
    if (auto id = pack_ids.find(name)) return *id;
    TRY_ASSIGN(auto s,
               statement("INSERT INTO packs(name) VALUES (?1) ON CONFLICT(name) DO NOTHING"));
    sqlite::bind_text(*s, 1, name);
    if (sqlite3_step(*s) != SQLITE_DONE) return archive_fault(Error{failure("adding a pack")});
    TRY_ASSIGN(auto q, statement("SELECT id FROM packs WHERE name = ?1"));
    sqlite::bind_text(*q, 1, name);
    TRY_ASSIGN(const std::optional<std::int64_t> id, optional_id(*q, "looking up a pack"));
    if (!id) return archive_fault(Error{failure("a pack just added is missing")});
    pack_ids.remember(name, *id, writing);
    return *id;
  }

  // The paths of the nodes directly beneath node `id` (at `path`), sorted, with their ids
  // and, when `with_history` (else true), whether they have a history.
  struct Child {
    std::string path;
    std::int64_t id;
    bool archived;
  };
  Expected<std::vector<Child>> children_of(std::int64_t id, std::string_view path,
                                           bool with_history) {
    // [schema 1][with_history]
    static constexpr const char* kSql[2][2] = {
        {"SELECT name, id, 1 FROM nodes WHERE parent = ?1 ORDER BY name",
         "SELECT name, id, EXISTS (SELECT 1 FROM versions WHERE node = nodes.id) "
         "FROM nodes WHERE parent = ?1 ORDER BY name"},
        {"SELECT path, id, 1 FROM nodes WHERE parent = ?1 ORDER BY path",
         "SELECT path, id, EXISTS (SELECT 1 FROM versions WHERE node = nodes.id) "
         "FROM nodes WHERE parent = ?1 ORDER BY path"}};
    std::vector<Child> out;
    TRY_ASSIGN(auto s, statement(kSql[schema == 1 ? 1 : 0][with_history ? 1 : 0]));
    sqlite3_bind_int64(*s, 1, id);
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      const std::string name = column_bytes(*s, 0);
      out.push_back({schema == 1 ? name : join_path(path, name), sqlite3_column_int64(*s, 1),
                     sqlite3_column_int(*s, 2) != 0});
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{failure("listing paths")});
    return out;
  }

  // `path` (node `id`) and every path beneath it, depth first; with `archived_only`, those
  // with a history only. Not sorted: a name may sort before its parent's '/'.
  Done walk(std::int64_t id, const std::string& path, bool archived, bool archived_only,
            std::vector<std::string>& out) {
    if (archived || !archived_only) out.push_back(path);
    TRY_ASSIGN(const auto children, children_of(id, path, archived_only));
    for (const auto& child : children) {
      TRY(walk(child.id, child.path, child.archived, archived_only, out));
    }
    return Ok{};
  }

  // The last `count` versions of `path` (-1: all), oldest first: one index range read.
  Expected<std::vector<Version>> history(std::string_view path, std::int64_t count) {
    TRY_ASSIGN(const std::optional<std::int64_t> node, node_of(path));
    std::vector<Version> out;
    if (!node) return out;
    TRY_ASSIGN(auto s, statement(select_versions_sql(schema)));
    sqlite3_bind_int64(*s, 1, *node);
    sqlite3_bind_int64(*s, 2, count);
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) out.push_back(read_version(*s));
    if (rc != SQLITE_DONE) return archive_fault(Error{failure("reading a history")});
    std::reverse(out.begin(), out.end());
    return out;
  }

  // Adds a batch's blobs and versions, inside commit()'s transaction.
  Done write(const std::vector<std::pair<std::string, BlobRef>>& blobs,
             const std::vector<std::pair<std::string, Version>>& versions) {
    for (const auto& [id, ref] : blobs) {
      TRY_ASSIGN(const std::int64_t pack, ensure_pack(ref.pack));
      TRY_ASSIGN(auto s, statement("INSERT OR IGNORE INTO blobs(id, pack, offset, stored, raw) "
                                   "VALUES (?1, ?2, ?3, ?4, ?5)"));
      bind_bytes(*s, 1, digest_bytes(id));
      sqlite3_bind_int64(*s, 2, pack);
      sqlite3_bind_int64(*s, 3, static_cast<sqlite3_int64>(ref.offset));
      sqlite3_bind_int64(*s, 4, static_cast<sqlite3_int64>(ref.stored));
      sqlite3_bind_int64(*s, 5, static_cast<sqlite3_int64>(ref.raw));
      if (sqlite3_step(*s) != SQLITE_DONE) return archive_fault(Error{failure("adding a blob")});
    }
    for (const auto& [path, v] : versions) {
      TRY_ASSIGN(const std::int64_t node, ensure_node(path));
      TRY(check_append(node, path, v));
      TRY(take_back(path, v));
      TRY_ASSIGN(auto s, statement(kInsertVersionSql));
      bind_version(*s, node, v);
      if (sqlite3_step(*s) != SQLITE_DONE) {
        return archive_fault(
            Error{failure(fmt::format("adding version {} of {}", v.number, shown_path(path)))});
      }
    }
    return Ok{};
  }

  // A version is appended to the history it was numbered after: the latest committed one
  // is number - 1 (a history retention removed whole starts again at 1). Else another
  // writer, or a forget, changed the history since the request read it: it runs again.
  Done check_append(std::int64_t node, const std::string& path, const Version& v) {
    TRY_ASSIGN(const std::uint64_t latest, latest_number(node));
    if (latest + 1 == v.number) return Ok{};
    return retry(fmt::format(
        "archive: version {} of {} follows version {}, not the latest, {}: the history changed "
        "meanwhile",
        v.number, shown_path(path), v.number - 1, latest));
  }

  // Every blob a version names is in the catalog, and no longer condemned: a collection
  // that found it unnamed will not remove it (FORMAT.md, "Collection"). One a collection
  // removed after the request looked it up fails the commit: the request runs again.
  Done take_back(const std::string& path, const Version& v) {
    for (const auto& id : v.chunks) {
      TRY_ASSIGN(auto s, statement("SELECT condemned IS NOT NULL FROM blobs WHERE id = ?1"));
      bind_bytes(s, 1, digest_bytes(id));
      const int rc = sqlite3_step(s);
      if (rc == SQLITE_DONE) {
        return retry(fmt::format(
            "archive: blob {} that version {} of {} names was removed by a collection meanwhile",
            id, v.number, shown_path(path)));
      }
      if (rc != SQLITE_ROW) return archive_fault(Error{failure("looking up a blob")});
      if (sqlite3_column_int(s, 0) == 0) continue;
      TRY_ASSIGN(auto clear, statement("UPDATE blobs SET condemned = NULL WHERE id = ?1"));
      bind_bytes(clear, 1, digest_bytes(id));
      if (sqlite3_step(clear) != SQLITE_DONE) {
        return archive_fault(Error{failure("taking back a blob")});
      }
    }
    return Ok{};
  }

  // Runs `f` (which returns an Expected) in one write transaction, committed when `f`
  // succeeds, else rolled back; the ids it added become everyone's once committed.
  template <class F>
  auto in_transaction(F&& f) -> decltype(f()) {
    TRY_ASSIGN(auto transaction, sqlite::Transaction::begin(db));
    writing = true;
    auto result = f();
    if (result) {
      if (auto committed = transaction.commit(); !committed) result = committed.fault();
    }
    writing = false;
    if (!result) {
      node_ids.rolled_back();
      pack_ids.rolled_back();
      return result;
    }
    node_ids.committed();
    pack_ids.committed();
    return result;
  }

  // The highest version number of node `node` (0: it has none).
  Expected<std::uint64_t> latest_number(std::int64_t node) {
    TRY_ASSIGN(auto s, statement("SELECT coalesce(max(number), 0) FROM versions WHERE node = ?1"));
    sqlite3_bind_int64(s, 1, node);
    if (sqlite3_step(s) != SQLITE_ROW) return archive_fault(Error{failure("reading a history")});
    return static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
  }

  // Retention and collection (catalog_retention.cpp, catalog_collect.cpp).
  Expected<KeptScopes> kept();
  // The store the shipping records are about (catalog_ship.cpp).
  Expected<std::optional<std::string>> ship_target();
  // Stores the kept moments of `folder` ("": the archive's own scope).
  Done store_kept(std::string_view folder, const KeptMoments& kept);
  Done drop(const DroppedVersions& dropped);
  Done purge_node(std::int64_t node, bool dry_run, std::int64_t collection, PurgeReport& report,
                  std::set<std::int64_t>& packs);
  Done mark_versions(std::vector<std::uint64_t>& bits, const std::function<bool()>& cancelled);
  Done sort_blobs(const std::vector<std::uint64_t>& bits, BlobMarks& marks);
  Done drop_pack_row(std::int64_t pack);

  // Space (catalog_space.cpp): the node ids and sorted numbers of the versions left out,
  // and the scan that marks the blobs every version names (`all`) and those the versions not
  // left out name (`kept`).
  using LeftOut = std::map<std::int64_t, std::vector<std::uint64_t>>;
  Expected<LeftOut> left_out_nodes(const std::vector<DroppedVersions>& left_out);
  Done mark_space(const LeftOut& left_out, std::vector<std::uint64_t>& all,
                  std::vector<std::uint64_t>& kept, const std::function<bool()>& cancelled);
  Done count_space(const std::vector<std::uint64_t>& all, const std::vector<std::uint64_t>& kept,
                   SpaceReport& out);
};

}  // namespace tw::archive
