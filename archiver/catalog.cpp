// The format-2 catalog (archiver/catalog.hpp) on SQLite.
#include "archiver/catalog.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "archiver/sha256.hpp"
#include "common/escape.hpp"
#include "common/paths.hpp"

namespace tw::archive {
namespace {

// Version 1 of the catalog's schema (PRAGMA user_version). Digests are stored as their 32
// bytes; `chunks` is the concatenation of a file's blob ids, NULL when the file is one chunk
// (its blob is then the content's own digest) or has none.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS nodes(
  id INTEGER PRIMARY KEY,
  path BLOB NOT NULL UNIQUE,
  parent INTEGER REFERENCES nodes(id));
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes(parent);
CREATE TABLE IF NOT EXISTS versions(
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
  PRIMARY KEY(node, number)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs(
  id BLOB PRIMARY KEY,
  pack TEXT NOT NULL,
  offset INTEGER NOT NULL,
  stored INTEGER NOT NULL,
  raw INTEGER NOT NULL) WITHOUT ROWID;
PRAGMA user_version = 1;
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

}  // namespace

struct Catalog::Impl {
  std::unique_ptr<sqlite3, DbClose> db;
  std::string file;
  std::map<std::string, Statement, std::less<>> statements;  // prepared once each

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

  // The node id of `path`, if it is in the tree.
  Result<std::optional<std::int64_t>> node_of(std::string_view path) {
    auto s = statement("SELECT id FROM nodes WHERE path = ?1");
    if (!s) return Error{s.error()};
    bind_bytes(*s, 1, path);
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_ROW) return std::optional<std::int64_t>(sqlite3_column_int64(*s, 0));
    if (rc == SQLITE_DONE) return std::optional<std::int64_t>();
    return Error{failure("looking up a path")};
  }

  // The node id of `path`, adding it and its missing ancestors (inside a transaction).
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
    auto s = statement("INSERT INTO nodes(path, parent) VALUES (?1, ?2)");
    if (!s) return Error{s.error()};
    bind_bytes(*s, 1, path);
    if (parent) sqlite3_bind_int64(*s, 2, *parent);
    if (sqlite3_step(*s) != SQLITE_DONE) return Error{failure("adding a path")};
    return sqlite3_last_insert_rowid(db.get());
  }

  static Version read_version(sqlite3_stmt* s) {
    // Columns: number, archived_at, op, size, sha256, mode, uid, gid, mtime, dev, ino,
    // link, moved_from, moved_to, chunks
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
    return v;
  }

  // The last `count` versions of `path` (-1: all), oldest first: one index range read.
  Result<std::vector<Version>> history(std::string_view path, std::int64_t count) {
    auto s = statement(
        "SELECT number, archived_at, op, size, sha256, mode, uid, gid, mtime, dev, ino, link, "
        "moved_from, moved_to, chunks FROM versions WHERE node = (SELECT id FROM nodes WHERE "
        "path = ?1) ORDER BY number DESC LIMIT ?2");
    if (!s) return Error{s.error()};
    bind_bytes(*s, 1, path);
    sqlite3_bind_int64(*s, 2, count);
    std::vector<Version> out;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) out.push_back(read_version(*s));
    if (rc != SQLITE_DONE) return Error{failure("reading a history")};
    std::reverse(out.begin(), out.end());
    return out;
  }

  Result<std::vector<std::string>> paths(sqlite3_stmt* s) {
    std::vector<std::string> out;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(column_bytes(s, 0));
    if (rc != SQLITE_DONE) return Error{failure("listing paths")};
    return out;
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

std::uint64_t CatalogBatch::blob_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [id, ref] : blobs_) total += ref.stored;
  return total;
}

Catalog::Catalog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Catalog::Catalog(Catalog&&) noexcept = default;
Catalog& Catalog::operator=(Catalog&&) noexcept = default;
Catalog::~Catalog() = default;

Result<Catalog> Catalog::open(const std::string& file, Store::Mode mode) {
  auto impl = std::make_unique<Impl>();
  impl->file = file;
  const bool writable = mode == Store::Mode::ReadWrite;
  const int flags = (writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
                    SQLITE_OPEN_NOMUTEX;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
  impl->db.reset(raw);
  if (rc != SQLITE_OK) return Error{impl->failure("opening")};
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  sqlite3_extended_result_codes(raw, 1);
  if (writable) {
    // WAL: readers never block the writer; FULL: a commit is durable when it returns.
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
    if (auto s = impl->exec("PRAGMA synchronous=FULL"); !s) return Error{s.error()};
    // Keep -wal and -shm when the last writer closes: a reader that may not write in the
    // archive (an operator's `timewarp check`) can only open a WAL database whose files
    // exist already.
    int persist = 1;
    sqlite3_file_control(raw, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    // ... but empty: a checkpointed WAL is cut back to nothing rather than kept at its
    // largest (4 MiB and more of a small archive's size).
    if (auto s = impl->exec("PRAGMA journal_size_limit=0"); !s) return Error{s.error()};
    // A checkpoint every 256 pages (1 MiB) instead of 1,000: the WAL a running archive
    // carries stays small, for one more sync of the catalog every 256 pages written.
    if (auto s = impl->exec("PRAGMA wal_autocheckpoint=256"); !s) return Error{s.error()};
    if (auto s = impl->exec("PRAGMA foreign_keys=ON"); !s) return Error{s.error()};
    // The schema in one transaction: a reader sees all of it (user_version 1) or none.
    if (auto s = impl->exec((std::string("BEGIN IMMEDIATE;") + kSchema + "COMMIT;").c_str()); !s) {
      (void)impl->exec("ROLLBACK");
      return Error{s.error()};
    }
  } else {
    // A catalog a writer has created but not yet set up (the archivers start beside the
    // monitor's first look at a new archive) holds nothing yet: refused as such, so that
    // a reader does not fail each look-up with "no such table" instead.
    auto version = impl->statement("PRAGMA user_version");
    if (!version) return Error{version.error()};
    if (sqlite3_step(*version) != SQLITE_ROW) {
      return Error{impl->failure("reading the catalog's version")};
    }
    if (sqlite3_column_int(*version, 0) < 1) {
      return Error{fmt::format("catalog {} is not set up yet (a new archive being created)",
                               shown_path(file))};
    }
  }
  return Catalog(std::move(impl));
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
  return impl_->history(path, -1);
}

Result<std::optional<Version>> Catalog::latest(std::string_view path) const {
  auto last = impl_->history(path, 1);
  if (!last) return Error{last.error()};
  if (last->empty()) return std::optional<Version>();
  return std::optional<Version>(std::move(last->front()));
}

Result<std::vector<std::string>> Catalog::children(std::string_view dir) const {
  auto s = impl_->statement(
      "SELECT path FROM nodes WHERE parent = (SELECT id FROM nodes WHERE path = ?1) "
      "ORDER BY path");
  if (!s) return Error{s.error()};
  bind_bytes(*s, 1, dir);
  return impl_->paths(*s);
}

Result<bool> Catalog::has_children(std::string_view dir) const {
  auto s = impl_->statement(
      "SELECT 1 FROM nodes WHERE parent = (SELECT id FROM nodes WHERE path = ?1) LIMIT 1");
  if (!s) return Error{s.error()};
  bind_bytes(*s, 1, dir);
  const int rc = sqlite3_step(*s);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error{impl_->failure("looking up children")};
}

Result<std::vector<std::string>> Catalog::archived_paths() const {
  auto s = impl_->statement(
      "SELECT path FROM nodes WHERE EXISTS (SELECT 1 FROM versions WHERE node = nodes.id) "
      "ORDER BY path");
  if (!s) return Error{s.error()};
  return impl_->paths(*s);
}

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

Result<std::vector<std::string>> Catalog::paths_within(std::string_view dir) const {
  // `dir` itself, then the range of paths that begin with "dir/": from "dir/" up to (not
  // including) "dir0", '0' being the byte after '/'.
  const std::string prefix = dir == "/" ? "/" : std::string(dir) + "/";
  std::string end = prefix;
  end.back() = static_cast<char>('/' + 1);
  auto s = impl_->statement(
      "SELECT path FROM nodes WHERE path = ?1 OR (path >= ?2 AND path < ?3) ORDER BY path");
  if (!s) return Error{s.error()};
  bind_bytes(*s, 1, dir);
  bind_bytes(*s, 2, prefix);
  bind_bytes(*s, 3, end);
  return impl_->paths(*s);
}

Result<std::optional<BlobRef>> Catalog::blob(std::string_view id) const {
  auto s = impl_->statement("SELECT pack, offset, stored, raw FROM blobs WHERE id = ?1");
  if (!s) return Error{s.error()};
  bind_bytes(*s, 1, digest_bytes(id));
  const int rc = sqlite3_step(*s);
  if (rc == SQLITE_DONE) return std::optional<BlobRef>();
  if (rc != SQLITE_ROW) return Error{impl_->failure("looking up a blob")};
  return std::optional<BlobRef>(BlobRef{reinterpret_cast<const char*>(sqlite3_column_text(*s, 0)),
                                        static_cast<std::uint64_t>(sqlite3_column_int64(*s, 1)),
                                        static_cast<std::uint64_t>(sqlite3_column_int64(*s, 2)),
                                        static_cast<std::uint64_t>(sqlite3_column_int64(*s, 3))});
}

Result<std::vector<std::pair<std::string, BlobRef>>> Catalog::all_blobs() const {
  auto s =
      impl_->statement("SELECT id, pack, offset, stored, raw FROM blobs ORDER BY pack, offset");
  if (!s) return Error{s.error()};
  std::vector<std::pair<std::string, BlobRef>> out;
  int rc;
  while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
    out.emplace_back(digest_hex(column_bytes(*s, 0)),
                     BlobRef{reinterpret_cast<const char*>(sqlite3_column_text(*s, 1)),
                             static_cast<std::uint64_t>(sqlite3_column_int64(*s, 2)),
                             static_cast<std::uint64_t>(sqlite3_column_int64(*s, 3)),
                             static_cast<std::uint64_t>(sqlite3_column_int64(*s, 4))});
  }
  if (rc != SQLITE_DONE) return Error{impl_->failure("listing blobs")};
  return out;
}

Done Catalog::commit(const CatalogBatch& batch) {
  if (batch.empty()) return Ok{};
  // IMMEDIATE: take the write lock first, so the transaction never fails half-way on a
  // lock another writer took meanwhile.
  if (auto begun = impl_->exec("BEGIN IMMEDIATE"); !begun) return retry(begun.error());
  const auto fail = [this](std::string message) -> Done {
    (void)impl_->exec("ROLLBACK");
    return retry(std::move(message));
  };
  for (const auto& [id, ref] : batch.blobs_) {
    auto s = impl_->statement(
        "INSERT OR IGNORE INTO blobs(id, pack, offset, stored, raw) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!s) return fail(s.error());
    bind_bytes(*s, 1, digest_bytes(id));
    sqlite3_bind_text(*s, 2, ref.pack.data(), static_cast<int>(ref.pack.size()), SQLITE_TRANSIENT);
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
        "mtime, dev, ino, link, moved_from, moved_to, chunks) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
        "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
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
    if (sqlite3_step(*s) != SQLITE_DONE) {
      return fail(
          impl_->failure(fmt::format("adding version {} of {}", v.number, shown_path(path))));
    }
  }
  if (auto done = impl_->exec("COMMIT"); !done) return fail(done.error());
  return Ok{};
}

}  // namespace tw::archive
