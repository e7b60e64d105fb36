// The format-2 catalog (archiver/catalog.hpp) on SQLite.
#include "archive/format2/catalog.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "archive/sha256.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// The catalog's schema (PRAGMA user_version). Digests are stored as their 32 bytes;
// `chunks` is the concatenation of a file's blob ids, NULL when the file is one chunk (its
// blob is then the content's own digest) or has none.
//
// Version 3 (this release writes it): the tree as (parent, name) rows, the root "/" being
// the row with no parent and an empty name, packs named once in `packs`, and each
// version's `read_after` (NULL: none; FORMAT.md, "Reads that answer later requests").
constexpr int kSchemaVersion = 3;
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

// How long a writer waits for another process's transaction before it gives up (RETRY).
constexpr int kBusyTimeoutMs = 60'000;

struct StatementFree {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Statement = std::unique_ptr<sqlite3_stmt, StatementFree>;

// A prepared statement in use: reset when it goes out of scope, so that no read
// transaction stays open after the caller is done (an open one would keep every later
// checkpoint from emptying the WAL, which would then grow without bound).
class Cursor {
 public:
  explicit Cursor(sqlite3_stmt* s) : s_(s) {}
  Cursor(Cursor&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}
  Cursor& operator=(Cursor&&) = delete;
  ~Cursor() {
    if (s_ != nullptr) sqlite3_reset(s_);
  }
  operator sqlite3_stmt*() const { return s_; }  // NOLINT(google-explicit-constructor)

 private:
  sqlite3_stmt* s_;
};

struct DbClose {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};

std::string column_bytes(sqlite3_stmt* s, int column) {
  const void* data = sqlite3_column_blob(s, column);
  const int size = sqlite3_column_bytes(s, column);
  return data == nullptr ? std::string() : std::string(static_cast<const char*>(data), size);
}

void bind_bytes(sqlite3_stmt* s, int index, std::string_view bytes) {
  sqlite3_bind_blob64(s, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
}

// A nullable text column: NULL when empty.
void bind_optional(sqlite3_stmt* s, int index, std::string_view bytes) {
  if (bytes.empty()) {
    sqlite3_bind_null(s, index);
  } else {
    bind_bytes(s, index, bytes);
  }
}

// Ids of nodes (by path) or of packs (by name), which never change once committed: those
// known committed, and those the transaction under way added, kept apart until it commits.
// Looked up by string_view, without a copy. The memory is bounded: a map that grows past
// 65,536 ids starts again.
class IdMemo {
 public:
  std::optional<std::int64_t> find(std::string_view key) const {
    if (auto it = known_.find(key); it != known_.end()) return it->second;
    if (auto it = added_.find(key); it != added_.end()) return it->second;
    return std::nullopt;
  }
  // Remembers an id found or added; inside a transaction (which may have added it) it
  // counts only once the transaction commits.
  void remember(std::string_view key, std::int64_t id, bool in_transaction) {
    Map& into = in_transaction ? added_ : known_;
    if (into.size() >= 65'536) into.clear();
    into.emplace(key, id);
  }
  void committed() {
    known_.merge(added_);
    added_.clear();
  }
  void rolled_back() { added_.clear(); }
  void forget() {
    known_.clear();
    added_.clear();
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const {
      return std::hash<std::string_view>{}(key);
    }
  };
  using Map = std::unordered_map<std::string, std::int64_t, Hash, std::equal_to<>>;
  Map known_, added_;
};

}  // namespace

struct Catalog::Impl {
  std::unique_ptr<sqlite3, DbClose> db;
  std::string file;
  int schema = kSchemaVersion;  // of the file (older only when read, before a writer upgrades it)
  std::map<std::string, Statement, std::less<>> statements;  // prepared once each
  IdMemo node_ids, pack_ids;  // schema 2 and later
  bool writing = false;       // inside commit()'s transaction
  UniqueFd journal;           // writable: catalog.db-wal, for sync_journal()

  std::string failure(std::string_view what) const {
    return fmt::format("catalog {}: {}: {}", shown_path(file), what, sqlite3_errmsg(db.get()));
  }

  // The prepared statement for `sql`, with its bindings cleared.
  Result<Cursor> statement(std::string_view sql) {
    auto it = statements.find(sql);
    if (it == statements.end()) {
      sqlite3_stmt* raw = nullptr;
      if (sqlite3_prepare_v3(db.get(), sql.data(), static_cast<int>(sql.size()),
                             SQLITE_PREPARE_PERSISTENT, &raw, nullptr) != SQLITE_OK) {
        return Error{failure("preparing a statement")};
      }
      it = statements.emplace(std::string(sql), Statement(raw)).first;
    }
    sqlite3_clear_bindings(it->second.get());
    return Cursor(it->second.get());
  }

  Status exec(const char* sql) {
    if (sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return Error{failure(sql)};
    }
    return Ok{};
  }

  Result<int> user_version() {
    auto s = statement("PRAGMA user_version");
    if (!s) return Error{s.error()};
    if (sqlite3_step(*s) != SQLITE_ROW) return Error{failure("reading the catalog's version")};
    return sqlite3_column_int(*s, 0);
  }

  // After a read failed: whether a writer has upgraded the catalog since it was opened (its
  // statements then name tables that are gone); if so, reads go on in the new schema.
  bool schema_changed() {
    auto now = user_version();
    if (!now || *now == schema || *now < 1 || *now > kSchemaVersion) return false;
    schema = *now;
    statements.clear();
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
    const std::int64_t id = sqlite3_last_insert_rowid(db.get());
    node_ids.remember(path, id, writing);
    return id;
  }

  // The id of pack `name`, adding it (inside commit(); schema 2 and later).
  Result<std::int64_t> ensure_pack(std::string_view name) {
    if (auto id = pack_ids.find(name)) return *id;
    auto s = statement("INSERT INTO packs(name) VALUES (?1) ON CONFLICT(name) DO NOTHING");
    if (!s) return Error{s.error()};
    sqlite3_bind_text(*s, 1, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(*s) != SQLITE_DONE) return Error{failure("adding a pack")};
    auto q = statement("SELECT id FROM packs WHERE name = ?1");
    if (!q) return Error{q.error()};
    sqlite3_bind_text(*q, 1, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
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

  static Version read_version(sqlite3_stmt* s) {
    // Columns: number, archived_at, op, size, sha256, mode, uid, gid, mtime, dev, ino,
    // link, moved_from, moved_to, chunks, and from schema 3 read_after
    Version v;
    v.number = static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
    v.archived_at_ns = sqlite3_column_int64(s, 1);
    v.op = parse_op(reinterpret_cast<const char*>(sqlite3_column_text(s, 2))).value_or(Op::Update);
    v.size = static_cast<std::uint64_t>(sqlite3_column_int64(s, 3));
    const std::string digest = column_bytes(s, 4);
    if (!digest.empty()) v.sha256 = digest_hex(digest);
    v.mode = static_cast<std::uint32_t>(sqlite3_column_int64(s, 5));
    v.uid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 6));
    v.gid = static_cast<std::uint32_t>(sqlite3_column_int64(s, 7));
    v.mtime_ns = sqlite3_column_int64(s, 8);
    v.dev = static_cast<std::uint64_t>(sqlite3_column_int64(s, 9));
    v.ino = static_cast<std::uint64_t>(sqlite3_column_int64(s, 10));
    v.link_target = column_bytes(s, 11);
    v.moved_from = column_bytes(s, 12);
    v.moved_to = column_bytes(s, 13);
    const std::string chunks = column_bytes(s, 14);
    for (std::size_t at = 0; at + 32 <= chunks.size(); at += 32) {
      v.chunks.push_back(digest_hex(std::string_view(chunks).substr(at, 32)));
    }
    // A file of one chunk, the content itself, is stored without its list (see commit()).
    if (chunks.empty() && v.exists() && v.is_file() && v.size > 0) v.chunks.push_back(v.sha256);
    if (sqlite3_column_count(s) > 15) v.read_after = sqlite3_column_int64(s, 15);
    return v;
  }

  // The last `count` versions of `path` (-1: all), oldest first: one index range read.
  Result<std::vector<Version>> history(std::string_view path, std::int64_t count) {
    auto node = node_of(path);
    if (!node) return Error{node.error()};
    std::vector<Version> out;
    if (!*node) return out;
    auto s =
        statement(schema >= 3 ? "SELECT number, archived_at, op, size, sha256, mode, uid, gid, "
                                "mtime, dev, ino, link, moved_from, moved_to, chunks, "
                                "read_after FROM versions WHERE node = ?1 ORDER BY number "
                                "DESC LIMIT ?2"
                              : "SELECT number, archived_at, op, size, sha256, mode, uid, gid, "
                                "mtime, dev, ino, link, moved_from, moved_to, chunks FROM "
                                "versions WHERE node = ?1 ORDER BY number DESC LIMIT ?2");
    if (!s) return Error{s.error()};
    sqlite3_bind_int64(*s, 1, **node);
    sqlite3_bind_int64(*s, 2, count);
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) out.push_back(read_version(*s));
    if (rc != SQLITE_DONE) return Error{failure("reading a history")};
    std::reverse(out.begin(), out.end());
    return out;
  }

  // A blob's place from a row of (pack name, offset, stored, raw) from column `first`.
  static BlobRef read_ref(sqlite3_stmt* s, int first) {
    return BlobRef{reinterpret_cast<const char*>(sqlite3_column_text(s, first)),
                   static_cast<std::uint64_t>(sqlite3_column_int64(s, first + 1)),
                   static_cast<std::uint64_t>(sqlite3_column_int64(s, first + 2)),
                   static_cast<std::uint64_t>(sqlite3_column_int64(s, first + 3))};
  }

  // Schema 1 to 2, inside the opening writer's transaction: node ids are kept, so versions
  // stay as they are; a node's name is the last component of its old path.
  Status upgrade_from_1() {
    for (const char* sql :
         {"PRAGMA legacy_alter_table=ON", kUpgrade1Begin, kNodesTable, kPacksAndBlobsTables,
          "PRAGMA legacy_alter_table=OFF", kUpgrade1Blobs}) {
      if (auto s = exec(sql); !s) return s;
    }
    {
      auto from = statement("SELECT id, parent, path FROM nodes_1");
      if (!from) return Error{from.error()};
      auto into = statement("INSERT INTO nodes(id, parent, name) VALUES (?1, ?2, ?3)");
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
        bind_bytes(*into, 3, base_name(column_bytes(*from, 2)));
        if (sqlite3_step(*into) != SQLITE_DONE) return Error{failure("upgrading the tree")};
      }
      if (rc != SQLITE_DONE) return Error{failure("reading the tree to upgrade")};
    }  // both statements reset before their tables change
    statements.clear();
    if (auto s = exec(kUpgrade1End); !s) return s;
    return upgrade_from_2();
  }

  // Schema 2 to 3, inside the opening writer's transaction.
  Status upgrade_from_2() {
    if (auto s = exec(kUpgrade2); !s) return s;
    return exec(kSetVersion);
  }
};

void CatalogBatch::add_version(std::string path, Version version) {
  versions_.emplace_back(std::move(path), std::move(version));
}

void CatalogBatch::add_blob(std::string id, BlobRef ref) {
  blobs_.emplace_back(std::move(id), std::move(ref));
}

const Version* CatalogBatch::latest(std::string_view path) const {
  for (auto it = versions_.rbegin(); it != versions_.rend(); ++it) {
    if (it->first == path) return &it->second;
  }
  return nullptr;
}

const BlobRef* CatalogBatch::blob(std::string_view id) const {
  for (const auto& [blob_id, ref] : blobs_) {
    if (blob_id == id) return &ref;
  }
  return nullptr;
}

std::vector<std::string_view> CatalogBatch::paths() const {
  std::vector<std::string_view> out;
  for (const auto& [path, version] : versions_) out.push_back(path);
  return out;
}

std::vector<Version> CatalogBatch::versions_of(std::string_view path) const {
  std::vector<Version> out;
  for (const auto& [p, version] : versions_) {
    if (p == path) out.push_back(version);
  }
  return out;
}

namespace {

// How many of a batch's entries lie before `mark`, `dropped` of them taken out already
// (none when the mark itself was taken out).
std::size_t beyond(std::size_t mark, std::size_t dropped) { return mark > dropped ? mark - dropped : 0; }

}  // namespace

std::uint64_t CatalogBatch::blob_bytes(Mark from) const {
  std::uint64_t total = 0;
  for (std::size_t i = beyond(from.blobs, dropped_.blobs); i < blobs_.size(); ++i) {
    total += blobs_[i].second.stored;
  }
  return total;
}

CatalogBatch CatalogBatch::split_front(Mark upto) {
  CatalogBatch front;
  front.dropped_ = dropped_;
  const auto take = [](auto& from, auto& into, std::size_t n) {
    n = std::min(n, from.size());
    into.assign(std::make_move_iterator(from.begin()),
                std::make_move_iterator(from.begin() + static_cast<std::ptrdiff_t>(n)));
    from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
    return n;
  };
  dropped_.versions += take(versions_, front.versions_, beyond(upto.versions, dropped_.versions));
  dropped_.blobs += take(blobs_, front.blobs_, beyond(upto.blobs, dropped_.blobs));
  return front;
}

Catalog::Catalog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Catalog::Catalog(Catalog&&) noexcept = default;
Catalog& Catalog::operator=(Catalog&&) noexcept = default;
Catalog::~Catalog() = default;

Result<Catalog> Catalog::open(const std::string& file, OpenMode mode) {
  auto impl = std::make_unique<Impl>();
  impl->file = file;
  const bool writable = mode == OpenMode::ReadWrite;
  const int flags = (writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
                    SQLITE_OPEN_NOMUTEX;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
  impl->db.reset(raw);
  if (rc != SQLITE_OK) return Error{impl->failure("opening")};
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  sqlite3_extended_result_codes(raw, 1);
  const auto too_new = [&](int version) {
    return Error{fmt::format("catalog {} has schema version {}, newer than this release reads ({})",
                             shown_path(file), version, kSchemaVersion)};
  };
  if (writable) {
    // WAL: readers never block the writer.
    // Switching to WAL takes the database alone; a catalog in use is in WAL already.
    bool wal = false;
    {
      auto mode_now = impl->statement("PRAGMA journal_mode");
      if (!mode_now) return Error{mode_now.error()};
      wal = sqlite3_step(*mode_now) == SQLITE_ROW && column_bytes(*mode_now, 0) == "wal";
    }  // reset here: no statement may stay open while the mode changes
    if (!wal) {
      if (auto s = impl->exec("PRAGMA journal_mode=WAL"); !s) return Error{s.error()};
    }
    // FULL while the schema is set up (that transaction is durable when it returns); a
    // commit() after it is durable once sync_journal() has returned (NORMAL: the journal is
    // synced at checkpoints only, and by sync_journal()).
    if (auto s = impl->exec("PRAGMA synchronous=FULL"); !s) return Error{s.error()};
    // Keep -wal and -shm when the last writer closes: a reader that may not write in the
    // archive (an operator's `timewarp check`) can only open a WAL database whose files
    // exist already.
    int persist = 1;
    sqlite3_file_control(raw, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    // ... and small: a checkpointed WAL is cut back to 2 MiB rather than kept at its largest.
    // Not to nothing: the WAL is then rewritten in place, in blocks the file already has,
    // so its sync flushes data without a commit of the filesystem's journal (2-5% off a
    // first backup of small files, measured). A quiet archiver empties it (fold_journal).
    if (auto s = impl->exec("PRAGMA journal_size_limit=2097152"); !s) return Error{s.error()};
    // A checkpoint every 256 pages (1 MiB) instead of 1,000: the WAL a running archive
    // carries stays small, for one more sync of the catalog every 256 pages written.
    if (auto s = impl->exec("PRAGMA wal_autocheckpoint=256"); !s) return Error{s.error()};
    // The schema is created, or upgraded, in one transaction: a reader sees all of it or
    // none. Foreign keys are checked once the upgrade is done, not while its tables are
    // swapped (dropping the old tree would otherwise count as deleting every node).
    if (auto s = impl->exec("PRAGMA foreign_keys=OFF"); !s) return Error{s.error()};
    if (auto s = impl->exec("BEGIN IMMEDIATE"); !s) return Error{s.error()};
    const auto set_up = [&]() -> Status {
      auto version = impl->user_version();
      if (!version) return Error{version.error()};
      if (*version > kSchemaVersion) return too_new(*version);
      if (*version == 0) {
        for (const char* sql : {kNodesTable, kVersionsTable, kPacksAndBlobsTables, kSetVersion}) {
          if (auto s = impl->exec(sql); !s) return s;
        }
      } else if (*version == 2) {
        if (auto s = impl->upgrade_from_2(); !s) return s;
      } else if (*version == 1) {
        if (auto s = impl->upgrade_from_1(); !s) return s;
        auto check = impl->statement("PRAGMA foreign_key_check");
        if (!check) return Error{check.error()};
        if (sqlite3_step(*check) != SQLITE_DONE) {
          return Error{impl->failure("the upgraded catalog names a node or pack it lacks")};
        }
      }
      return impl->exec("COMMIT");
    };
    if (auto s = set_up(); !s) {
      (void)impl->exec("ROLLBACK");
      return Error{s.error()};
    }
    impl->statements.clear();
    if (auto s = impl->exec("PRAGMA foreign_keys=ON"); !s) return Error{s.error()};
    if (auto s = impl->exec("PRAGMA synchronous=NORMAL"); !s) return Error{s.error()};
    // The journal exists now (a WAL database's first read made it, and it persists).
    const std::string journal = file + "-wal";
    impl->journal.reset(::open(journal.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!impl->journal) {
      return Error{fmt::format("cannot open the catalog's journal {}: {}", shown_path(journal),
                               std::strerror(errno))};
    }
  } else {
    // A catalog a writer has created but not yet set up (the archivers start beside the
    // monitor's first look at a new archive) holds nothing yet: refused as such, so that
    // a reader does not fail each look-up with "no such table" instead.
    auto version = impl->user_version();
    if (!version) return Error{version.error()};
    if (*version < 1) {
      return Error{fmt::format("catalog {} is not set up yet (a new archive being created)",
                               shown_path(file))};
    }
    if (*version > kSchemaVersion) return too_new(*version);
    impl->schema = *version;
  }
  return Catalog(std::move(impl));
}

Done Catalog::sync_journal() const {
  if (!impl_->journal) return Ok{};
  if (::fdatasync(impl_->journal.get()) != 0) {
    return errno_fault(errno, Side::Archive,
                       fmt::format("syncing the journal of {}", shown_path(impl_->file)));
  }
  return Ok{};
}

Result<bool> Catalog::fold_journal(std::chrono::milliseconds wait) {
  sqlite3* db = impl_->db.get();
  sqlite3_busy_timeout(db, static_cast<int>(wait.count()));
  const int rc = sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return false;
  if (rc != SQLITE_OK) return Error{impl_->failure("folding the journal into the catalog")};
  return true;
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
    return std::optional<BlobRef>(Impl::read_ref(*s, 0));
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
      out.emplace_back(digest_hex(column_bytes(*s, 0)), Impl::read_ref(*s, 1));
    }
    if (rc != SQLITE_DONE) return Error{impl_->failure("listing blobs")};
    return out;
  });
}

Done Catalog::commit(const CatalogBatch& batch) {
  if (batch.empty()) return Ok{};
  // IMMEDIATE: take the write lock first, so the transaction never fails half-way on a
  // lock another writer took meanwhile.
  if (auto begun = impl_->exec("BEGIN IMMEDIATE"); !begun) return retry(begun.error());
  impl_->writing = true;
  const auto fail = [this](std::string message) -> Done {
    (void)impl_->exec("ROLLBACK");
    impl_->writing = false;
    impl_->node_ids.rolled_back();
    impl_->pack_ids.rolled_back();
    return retry(std::move(message));
  };
  for (const auto& [id, ref] : batch.blobs_) {
    auto pack = impl_->ensure_pack(ref.pack);
    if (!pack) return fail(pack.error());
    auto s = impl_->statement(
        "INSERT OR IGNORE INTO blobs(id, pack, offset, stored, raw) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!s) return fail(s.error());
    bind_bytes(*s, 1, digest_bytes(id));
    sqlite3_bind_int64(*s, 2, *pack);
    sqlite3_bind_int64(*s, 3, static_cast<sqlite3_int64>(ref.offset));
    sqlite3_bind_int64(*s, 4, static_cast<sqlite3_int64>(ref.stored));
    sqlite3_bind_int64(*s, 5, static_cast<sqlite3_int64>(ref.raw));
    if (sqlite3_step(*s) != SQLITE_DONE) return fail(impl_->failure("adding a blob"));
  }
  for (const auto& [path, v] : batch.versions_) {
    auto node = impl_->ensure_node(path);
    if (!node) return fail(node.error());
    auto s = impl_->statement(
        "INSERT INTO versions(node, number, archived_at, op, size, sha256, mode, uid, gid, "
        "mtime, dev, ino, link, moved_from, moved_to, chunks, read_after) VALUES (?1, ?2, ?3, "
        "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
    if (!s) return fail(s.error());
    const std::string_view op = to_string(v.op);
    // The list of blobs, left out when it is just the content's own digest (a file of one
    // chunk: most files), which the reader puts back.
    std::string chunks;
    if (!(v.chunks.size() == 1 && v.chunks.front() == v.sha256)) {
      for (const auto& id : v.chunks) chunks += digest_bytes(id);
    }
    sqlite3_bind_int64(*s, 1, *node);
    sqlite3_bind_int64(*s, 2, static_cast<sqlite3_int64>(v.number));
    sqlite3_bind_int64(*s, 3, v.archived_at_ns);
    sqlite3_bind_text(*s, 4, op.data(), static_cast<int>(op.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(*s, 5, static_cast<sqlite3_int64>(v.size));
    bind_optional(*s, 6, v.sha256.empty() ? std::string() : digest_bytes(v.sha256));
    sqlite3_bind_int64(*s, 7, v.mode);
    sqlite3_bind_int64(*s, 8, v.uid);
    sqlite3_bind_int64(*s, 9, v.gid);
    sqlite3_bind_int64(*s, 10, v.mtime_ns);
    sqlite3_bind_int64(*s, 11, static_cast<sqlite3_int64>(v.dev));
    sqlite3_bind_int64(*s, 12, static_cast<sqlite3_int64>(v.ino));
    bind_optional(*s, 13, v.link_target);
    bind_optional(*s, 14, v.moved_from);
    bind_optional(*s, 15, v.moved_to);
    bind_optional(*s, 16, chunks);
    if (v.read_after > 0) sqlite3_bind_int64(*s, 17, v.read_after);  // else NULL
    if (sqlite3_step(*s) != SQLITE_DONE) {
      return fail(
          impl_->failure(fmt::format("adding version {} of {}", v.number, shown_path(path))));
    }
  }
  if (auto done = impl_->exec("COMMIT"); !done) return fail(done.error());
  // Committed: the ids the transaction added are now everyone's.
  impl_->writing = false;
  impl_->node_ids.committed();
  impl_->pack_ids.committed();
  return Ok{};
}

}  // namespace tw::archive
