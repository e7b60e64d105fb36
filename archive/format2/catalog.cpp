// The format-2 catalog (catalog.hpp) on SQLite: opening it, the queries and the commit.
#include "archive/format2/catalog.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "archive/format2/catalog_rows.hpp"
#include "archive/format2/catalog_schema.hpp"
#include "archive/format2/id_memo.hpp"
#include "archive/format2/sqlite.hpp"
#include "archive/sha256.hpp"
#include "common/escape.hpp"
#include "common/fd.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

using sqlite::bind_bytes;
using sqlite::column_bytes;

// A writer's journal: WAL, so that readers never block the writer, kept small, and synced
// in full until the schema is set up (that transaction is durable when it returns).
Status set_up_journal(sqlite::Database& db) {
  // Switching to WAL takes the database alone; a catalog in use is in WAL already.
  bool wal = false;
  {
    auto mode_now = db.statement("PRAGMA journal_mode");
    if (!mode_now) return Error{mode_now.error()};
    wal = sqlite3_step(*mode_now) == SQLITE_ROW && column_bytes(*mode_now, 0) == "wal";
  }  // reset here: no statement may stay open while the mode changes
  if (!wal) {
    if (auto s = db.exec("PRAGMA journal_mode=WAL"); !s) return s;
  }
  // FULL while the schema is set up; a commit() after it is durable once sync_journal()
  // has returned (NORMAL, set once the schema is: the journal is synced at checkpoints
  // only, and by sync_journal()).
  if (auto s = db.exec("PRAGMA synchronous=FULL"); !s) return s;
  // Keep -wal and -shm when the last writer closes: a reader that may not write in the
  // archive (an operator's `timewarp check`) can only open a WAL database whose files
  // exist already.
  int persist = 1;
  sqlite3_file_control(db.handle(), "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  // ... and small: a checkpointed WAL is cut back to 2 MiB rather than kept at its largest.
  // Not to nothing: the WAL is then rewritten in place, in blocks the file already has,
  // so its sync flushes data without a commit of the filesystem's journal (2-5% off a
  // first backup of small files, measured). A quiet archiver empties it (fold_journal).
  if (auto s = db.exec("PRAGMA journal_size_limit=2097152"); !s) return s;
  // A checkpoint every 256 pages (1 MiB) instead of 1,000: the WAL a running archive
  // carries stays small, for one more sync of the catalog every 256 pages written.
  return db.exec("PRAGMA wal_autocheckpoint=256");
}

// The journal's descriptor, for sync_journal(): it exists once the schema is set up (a WAL
// database's first read made it, and it persists).
Result<UniqueFd> open_journal(const std::string& file) {
  const std::string journal = file + "-wal";
  UniqueFd fd(::open(journal.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    return Error{fmt::format("cannot open the catalog's journal {}: {}", shown_path(journal),
                             std::strerror(errno))};
  }
  return fd;
}

}  // namespace

struct Catalog::Impl {
  explicit Impl(sqlite::Database opened) : db(std::move(opened)) {}

  sqlite::Database db;
  int schema = kCatalogSchema;  // of the file (older only when read, before a writer upgrades it)
  IdMemo node_ids, pack_ids;    // schema 2 and later
  bool writing = false;         // inside commit()'s transaction
  UniqueFd journal;             // writable: catalog.db-wal, for sync_journal()

  std::string failure(std::string_view what) const { return db.failure(what); }
  Result<sqlite::Cursor> statement(std::string_view sql) { return db.statement(sql); }

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

  // The node id of `path`, if it is in the tree. Schema 2 walks down from the root, one
  // look-up per component not yet known (a directory's id is kept once looked up).
  Result<std::optional<std::int64_t>> node_of(std::string_view path) {
    if (schema == 1) {
      auto s = statement("SELECT id FROM nodes WHERE path = ?1");
      if (!s) return Error{s.error()};
      bind_bytes(*s, 1, path);
      return optional_id(*s, "looking up a path");
    }
    if (auto id = node_ids.find(path)) return id;
    std::optional<std::int64_t> found;
    if (path == "/") {
      auto s = statement("SELECT id FROM nodes WHERE parent IS NULL");
      if (!s) return Error{s.error()};
      auto id = optional_id(*s, "looking up the root");
      if (!id) return id;
      found = *id;
    } else {
      auto parent = node_of(parent_path(path));
      if (!parent || !*parent) return parent;
      auto s = statement("SELECT id FROM nodes WHERE parent = ?1 AND name = ?2");
      if (!s) return Error{s.error()};
      sqlite3_bind_int64(*s, 1, **parent);
      bind_bytes(*s, 2, base_name(path));
      auto id = optional_id(*s, "looking up a path");
      if (!id) return id;
      found = *id;
    }
    // Found by a read inside commit()'s transaction, it may be the transaction's own.
    if (found) node_ids.remember(path, *found, writing);
    return found;
  }

  Result<std::optional<std::int64_t>> optional_id(sqlite3_stmt* s, std::string_view what) {
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) return std::optional<std::int64_t>(sqlite3_column_int64(s, 0));
    if (rc == SQLITE_DONE) return std::optional<std::int64_t>();
    return Error{failure(what)};
  }

  // The node id of `path`, adding it and its missing ancestors (inside commit(); schema 2 and
  // later).
  Result<std::int64_t> ensure_node(const std::string& path) {
    auto found = node_of(path);
    if (!found) return Error{found.error()};
    if (*found) return **found;
    std::optional<std::int64_t> parent;
    if (path != "/") {
      auto up = ensure_node(parent_path(path));
      if (!up) return up;
      parent = *up;
    }
    auto s = statement("INSERT INTO nodes(parent, name) VALUES (?1, ?2)");
    if (!s) return Error{s.error()};
    if (parent) sqlite3_bind_int64(*s, 1, *parent);
    bind_bytes(*s, 2, base_name(path));
    if (sqlite3_step(*s) != SQLITE_DONE) return Error{failure("adding a path")};
    const std::int64_t id = db.last_insert_rowid();
    node_ids.remember(path, id, writing);
    return id;
  }

  // The id of pack `name`, adding it (inside commit(); schema 2 and later).
  Result<std::int64_t> ensure_pack(std::string_view name) {
    if (auto id = pack_ids.find(name)) return *id;
    auto s = statement("INSERT INTO packs(name) VALUES (?1) ON CONFLICT(name) DO NOTHING");
    if (!s) return Error{s.error()};
    sqlite::bind_text(*s, 1, name);
    if (sqlite3_step(*s) != SQLITE_DONE) return Error{failure("adding a pack")};
    auto q = statement("SELECT id FROM packs WHERE name = ?1");
    if (!q) return Error{q.error()};
    sqlite::bind_text(*q, 1, name);
    auto id = optional_id(*q, "looking up a pack");
    if (!id) return Error{id.error()};
    if (!*id) return Error{failure("a pack just added is missing")};
    pack_ids.remember(name, **id, writing);
    return **id;
  }

  // The paths of the nodes directly beneath node `id` (at `path`), sorted, with their ids
  // and, when `with_history` (else true), whether they have a history.
  struct Child {
    std::string path;
    std::int64_t id;
    bool archived;
  };
  Result<std::vector<Child>> children_of(std::int64_t id, std::string_view path,
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
    auto s = statement(kSql[schema == 1 ? 1 : 0][with_history ? 1 : 0]);
    if (!s) return Error{s.error()};
    sqlite3_bind_int64(*s, 1, id);
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      const std::string name = column_bytes(*s, 0);
      out.push_back({schema == 1 ? name : join_path(path, name), sqlite3_column_int64(*s, 1),
                     sqlite3_column_int(*s, 2) != 0});
    }
    if (rc != SQLITE_DONE) return Error{failure("listing paths")};
    return out;
  }

  // `path` (node `id`) and every path beneath it, depth first; with `archived_only`, those
  // with a history only. Not sorted: a name may sort before its parent's '/'.
  Status walk(std::int64_t id, const std::string& path, bool archived, bool archived_only,
              std::vector<std::string>& out) {
    if (archived || !archived_only) out.push_back(path);
    auto children = children_of(id, path, archived_only);
    if (!children) return Error{children.error()};
    for (auto& child : *children) {
      if (auto s = walk(child.id, child.path, child.archived, archived_only, out); !s) return s;
    }
    return Ok{};
  }

  // The last `count` versions of `path` (-1: all), oldest first: one index range read.
  Result<std::vector<Version>> history(std::string_view path, std::int64_t count) {
    auto node = node_of(path);
    if (!node) return Error{node.error()};
    std::vector<Version> out;
    if (!*node) return out;
    auto s = statement(select_versions_sql(schema));
    if (!s) return Error{s.error()};
    sqlite3_bind_int64(*s, 1, **node);
    sqlite3_bind_int64(*s, 2, count);
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) out.push_back(read_version(*s));
    if (rc != SQLITE_DONE) return Error{failure("reading a history")};
    std::reverse(out.begin(), out.end());
    return out;
  }

  // Adds a batch's blobs and versions, inside commit()'s transaction.
  Status write(const std::vector<std::pair<std::string, BlobRef>>& blobs,
               const std::vector<std::pair<std::string, Version>>& versions) {
    for (const auto& [id, ref] : blobs) {
      auto pack = ensure_pack(ref.pack);
      if (!pack) return Error{pack.error()};
      auto s = statement(
          "INSERT OR IGNORE INTO blobs(id, pack, offset, stored, raw) VALUES (?1, ?2, ?3, ?4, ?5)");
      if (!s) return Error{s.error()};
      bind_bytes(*s, 1, digest_bytes(id));
      sqlite3_bind_int64(*s, 2, *pack);
      sqlite3_bind_int64(*s, 3, static_cast<sqlite3_int64>(ref.offset));
      sqlite3_bind_int64(*s, 4, static_cast<sqlite3_int64>(ref.stored));
      sqlite3_bind_int64(*s, 5, static_cast<sqlite3_int64>(ref.raw));
      if (sqlite3_step(*s) != SQLITE_DONE) return Error{failure("adding a blob")};
    }
    for (const auto& [path, v] : versions) {
      auto node = ensure_node(path);
      if (!node) return Error{node.error()};
      auto s = statement(kInsertVersionSql);
      if (!s) return Error{s.error()};
      bind_version(*s, *node, v);
      if (sqlite3_step(*s) != SQLITE_DONE) {
        return Error{failure(fmt::format("adding version {} of {}", v.number, shown_path(path)))};
      }
    }
    return Ok{};
  }
};

Catalog::Catalog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Catalog::Catalog(Catalog&&) noexcept = default;
Catalog& Catalog::operator=(Catalog&&) noexcept = default;
Catalog::~Catalog() = default;

Result<Catalog> Catalog::open(const std::string& file, OpenMode mode) {
  const bool writable = mode == OpenMode::ReadWrite;
  auto db = sqlite::Database::open(file, writable);
  if (!db) return Error{db.error()};
  auto impl = std::make_unique<Impl>(std::move(*db));
  if (!writable) {
    auto version = readable_schema(impl->db);
    if (!version) return Error{version.error()};
    impl->schema = *version;
    return Catalog(std::move(impl));
  }
  if (auto s = set_up_journal(impl->db); !s) return Error{s.error()};
  if (auto s = set_up_schema(impl->db); !s) return Error{s.error()};
  if (auto s = impl->db.exec("PRAGMA synchronous=NORMAL"); !s) return Error{s.error()};
  auto journal = open_journal(file);
  if (!journal) return Error{journal.error()};
  impl->journal = std::move(*journal);
  return Catalog(std::move(impl));
}

Done Catalog::sync_journal() const {
  if (!impl_->journal) return Ok{};
  if (::fdatasync(impl_->journal.get()) != 0) {
    return errno_fault(errno, Side::Archive,
                       fmt::format("syncing the journal of {}", shown_path(impl_->db.file())));
  }
  return Ok{};
}

Result<bool> Catalog::fold_journal(std::chrono::milliseconds wait) {
  return impl_->db.checkpoint(wait);
}

Result<std::vector<Version>> Catalog::versions(std::string_view path) const {
  return impl_->read([&] { return impl_->history(path, -1); });
}

Result<std::optional<Version>> Catalog::latest(std::string_view path) const {
  auto last = impl_->read([&] { return impl_->history(path, 1); });
  if (!last) return Error{last.error()};
  if (last->empty()) return std::optional<Version>();
  return std::optional<Version>(std::move(last->front()));
}

Result<std::vector<std::string>> Catalog::children(std::string_view dir) const {
  return impl_->read([&]() -> Result<std::vector<std::string>> {
    auto node = impl_->node_of(dir);
    if (!node) return Error{node.error()};
    std::vector<std::string> out;
    if (!*node) return out;
    auto children = impl_->children_of(**node, dir, false);
    if (!children) return Error{children.error()};
    for (auto& child : *children) out.push_back(std::move(child.path));
    return out;
  });
}

Result<bool> Catalog::has_children(std::string_view dir) const {
  return impl_->read([&]() -> Result<bool> {
    auto node = impl_->node_of(dir);
    if (!node) return Error{node.error()};
    if (!*node) return false;
    auto s = impl_->statement("SELECT 1 FROM nodes WHERE parent = ?1 LIMIT 1");
    if (!s) return Error{s.error()};
    sqlite3_bind_int64(*s, 1, **node);
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Error{impl_->failure("looking up children")};
  });
}

// `dir`'s subtree (the whole tree from "/"), sorted by path; `archived_only`: the paths
// with a history.
Result<std::vector<std::string>> Catalog::subtree(std::string_view dir, bool archived_only) const {
  return impl_->read([&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    auto node = impl_->node_of(dir);
    if (!node) return Error{node.error()};
    if (!*node) return out;
    bool archived = true;
    if (archived_only) {
      auto s = impl_->statement("SELECT EXISTS (SELECT 1 FROM versions WHERE node = ?1)");
      if (!s) return Error{s.error()};
      sqlite3_bind_int64(*s, 1, **node);
      if (sqlite3_step(*s) != SQLITE_ROW) return Error{impl_->failure("reading a history")};
      archived = sqlite3_column_int(*s, 0) != 0;
    }
    if (auto s = impl_->walk(**node, std::string(dir), archived, archived_only, out); !s) {
      return Error{s.error()};
    }
    std::sort(out.begin(), out.end());
    return out;
  });
}

Result<std::vector<std::string>> Catalog::archived_paths() const { return subtree("/", true); }

Result<std::vector<std::string>> Catalog::paths_within(std::string_view dir) const {
  return subtree(dir, false);
}

int Catalog::schema_version() const { return impl_->schema; }

Result<std::string> Catalog::integrity_problems() const {
  auto s = impl_->statement("PRAGMA integrity_check");
  if (!s) return Error{s.error()};
  std::string problems;
  int rc;
  while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
    const std::string line = column_bytes(*s, 0);
    if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
  }
  if (rc != SQLITE_DONE) return Error{impl_->failure("checking integrity")};
  return problems;
}

Result<std::optional<BlobRef>> Catalog::blob(std::string_view id) const {
  return impl_->read([&]() -> Result<std::optional<BlobRef>> {
    auto s = impl_->statement(impl_->schema == 1
                                  ? "SELECT pack, offset, stored, raw FROM blobs WHERE id = ?1"
                                  : "SELECT p.name, b.offset, b.stored, b.raw FROM blobs b "
                                    "JOIN packs p ON p.id = b.pack WHERE b.id = ?1");
    if (!s) return Error{s.error()};
    bind_bytes(*s, 1, digest_bytes(id));
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_DONE) return std::optional<BlobRef>();
    if (rc != SQLITE_ROW) return Error{impl_->failure("looking up a blob")};
    return std::optional<BlobRef>(read_ref(*s, 0));
  });
}

Result<std::vector<std::pair<std::string, BlobRef>>> Catalog::all_blobs() const {
  return impl_->read([&]() -> Result<std::vector<std::pair<std::string, BlobRef>>> {
    auto s = impl_->statement(
        impl_->schema == 1 ? "SELECT id, pack, offset, stored, raw FROM blobs ORDER BY pack, offset"
                           : "SELECT b.id, p.name, b.offset, b.stored, b.raw FROM blobs b JOIN "
                             "packs p ON p.id = b.pack ORDER BY b.pack, b.offset");
    if (!s) return Error{s.error()};
    std::vector<std::pair<std::string, BlobRef>> out;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      out.emplace_back(digest_hex(column_bytes(*s, 0)), read_ref(*s, 1));
    }
    if (rc != SQLITE_DONE) return Error{impl_->failure("listing blobs")};
    return out;
  });
}

Done Catalog::commit(const CatalogBatch& batch) {
  if (batch.empty()) return Ok{};
  auto transaction = sqlite::Transaction::begin(impl_->db);
  if (!transaction) return retry(transaction.error());
  impl_->writing = true;
  auto written = impl_->write(batch.blobs_, batch.versions_);
  if (written) written = transaction->commit();
  impl_->writing = false;
  if (!written) {  // rolled back as `transaction` ends
    impl_->node_ids.rolled_back();
    impl_->pack_ids.rolled_back();
    return retry(written.error());
  }
  // Committed: the ids the transaction added are now everyone's.
  impl_->node_ids.committed();
  impl_->pack_ids.committed();
  return Ok{};
}

}  // namespace tw::archive
