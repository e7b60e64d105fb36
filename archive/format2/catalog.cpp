// The format-2 catalog (catalog.hpp) on SQLite: opening it, the queries and the commit
// (the catalog's inside: catalog_impl.hpp; the tree's listings and checks:
// catalog_structure.cpp).
#include "archive/format2/catalog.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "archive/format2/catalog_impl.hpp"

namespace tw::archive {
namespace {

// A writer's journal: WAL, so that readers never block the writer, kept small, and synced
// in full until the schema is set up (that transaction is durable when it returns).
Done set_up_journal(sqlite::Database& db) {
  // Switching to WAL takes the database alone; a catalog in use is in WAL already.
  bool wal = false;
  {
    TRY_ASSIGN(auto mode_now, db.statement("PRAGMA journal_mode"));
    wal = sqlite3_step(*mode_now) == SQLITE_ROW && column_bytes(*mode_now, 0) == "wal";
  }  // reset here: no statement may stay open while the mode changes
  if (!wal) TRY(db.exec("PRAGMA journal_mode=WAL"));
  // FULL while the schema is set up; a commit() after it is durable once sync_journal()
  // has returned (NORMAL, set once the schema is: the journal is synced at checkpoints
  // only, and by sync_journal()).
  TRY(db.exec("PRAGMA synchronous=FULL"));
  // Keep -wal and -shm when the last writer closes: a reader that may not write in the
  // archive (an operator's `timewarp check`) can only open a WAL database whose files
  // exist already.
  int persist = 1;
  sqlite3_file_control(db.handle(), "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  // ... and small: a checkpointed WAL is cut back to 2 MiB rather than kept at its largest.
  // Not to nothing: the WAL is then rewritten in place, in blocks the file already has,
  // so its sync flushes data without a commit of the filesystem's journal (2-5% off a
  // first backup of small files, measured). A quiet archiver empties it (fold_journal).
  TRY(db.exec("PRAGMA journal_size_limit=2097152"));
  // A checkpoint every 256 pages (1 MiB) instead of 1,000 while the schema is set up; after
  // it, the checkpointer's (Catalog::open).
  return db.exec("PRAGMA wal_autocheckpoint=256");
}

// The journal's descriptor, for sync_journal(): it exists once the schema is set up (a WAL
// database's first read made it, and it persists).
Expected<UniqueFd> open_journal(const std::string& file) {
  const std::string journal = file + "-wal";
  UniqueFd fd(::open(journal.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    return archive_fault(Error{fmt::format("cannot open the catalog's journal {}: {}",
                                           shown_path(journal), std::strerror(errno))});
  }
  return fd;
}

}  // namespace

Catalog::Catalog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Catalog::Catalog(Catalog&&) noexcept = default;
Catalog& Catalog::operator=(Catalog&&) noexcept = default;
Catalog::~Catalog() = default;

Expected<Catalog> Catalog::open(const std::string& file, OpenMode mode) {
  const bool writable = mode == OpenMode::ReadWrite;
  TRY_ASSIGN(sqlite::Database db, sqlite::Database::open(file, writable));
  auto impl = std::make_unique<Impl>(std::move(db));
  if (!writable) {
    TRY_ASSIGN(impl->schema, readable_schema(impl->db));
    return Catalog(std::move(impl));
  }
  TRY(set_up_journal(impl->db));
  TRY(set_up_schema(impl->db));
  TRY(impl->db.exec("PRAGMA synchronous=NORMAL"));
  // A writer reads the catalog's file through a memory map: another archiver's commit
  // empties this connection's page cache, and each look-up after it read its pages again
  // with pread (about 5% of the archivers' CPU in a first backup of small files, in two
  // runs each way). An I/O error on a mapped page ends the process (SIGBUS) instead of
  // failing the read: an archiver is restarted and its requests retried; readers (restore,
  // verify) keep pread and their messages.
  TRY(impl->db.exec("PRAGMA mmap_size=1073741824"));
  // The journal is folded every Checkpointer::kPages pages (1 MiB: the WAL a running archive
  // carries stays small) on a thread of its own, not in the commit that filled it.
  impl->checkpointer = std::make_unique<Checkpointer>(file);
  impl->checkpointer->watch(impl->db.handle());
  TRY_ASSIGN(impl->journal, open_journal(file));
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

Expected<bool> Catalog::fold_journal(std::chrono::milliseconds wait) {
  return impl_->db.checkpoint(wait);
}

Expected<std::vector<Version>> Catalog::versions(std::string_view path) const {
  return impl_->read([&] { return impl_->history(path, -1); });
}

Done Catalog::each_history(
    const std::vector<std::string>& paths,
    const std::function<bool(std::size_t, Expected<std::vector<Version>>)>& each) const {
  return impl_->in_snapshot([&]() -> Done {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      auto history = impl_->history(paths[i], -1);
      if (!history && impl_->schema_changed()) history = impl_->history(paths[i], -1);
      if (!each(i, std::move(history))) break;
    }
    return Ok{};
  });
}

Expected<std::optional<Version>> Catalog::latest(std::string_view path) const {
  TRY_ASSIGN(std::vector<Version> last, impl_->read([&] { return impl_->history(path, 1); }));
  if (last.empty()) return std::optional<Version>();
  return std::optional<Version>(std::move(last.front()));
}

Expected<bool> Catalog::has_children(std::string_view dir) const {
  return impl_->read([&]() -> Expected<bool> {
    TRY_ASSIGN(const std::optional<std::int64_t> node, impl_->node_of(dir));
    if (!node) return false;
    return impl_->any_child(*node);
  });
}

Expected<PathState> Catalog::path_state(std::string_view path) const {
  const auto look = [&]() -> Expected<PathState> {
    PathState state;
    TRY_ASSIGN(const std::optional<std::int64_t> node, impl_->node_of(path));
    if (!node) return state;
    TRY_ASSIGN(std::vector<Version> last, impl_->history(path, 1));
    if (!last.empty()) state.latest = std::move(last.front());
    TRY_ASSIGN(state.children, impl_->any_child(*node));
    return state;
  };
  return impl_->read([&] { return impl_->in_snapshot(look); });
}

int Catalog::schema_version() const { return impl_->schema; }

Expected<std::string> Catalog::integrity_problems(const std::function<bool()>& cancelled) const {
  TRY_ASSIGN(auto s, impl_->statement("PRAGMA integrity_check"));
  // `cancelled` polled every so many of SQLite's steps: the check of a large catalog reads
  // all of it.
  sqlite3* const db = impl_->db.handle();
  const auto poll = [](void* asked) {
    const auto& stop = *static_cast<const std::function<bool()>*>(asked);
    return stop && stop() ? 1 : 0;
  };
  sqlite3_progress_handler(db, 100000, poll, const_cast<std::function<bool()>*>(&cancelled));
  Defer unpoll([db] { sqlite3_progress_handler(db, 0, nullptr, nullptr); });
  std::string problems;
  int rc;
  while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
    const std::string line = column_bytes(*s, 0);
    if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
  }
  if (rc == SQLITE_INTERRUPT) return retry("cancelled");
  if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("checking integrity")});
  return problems;
}

Expected<std::optional<BlobRef>> Catalog::blob(std::string_view id) const {
  return impl_->read([&]() -> Expected<std::optional<BlobRef>> {
    TRY_ASSIGN(auto s,
               impl_->statement(impl_->schema == 1
                                    ? "SELECT pack, offset, stored, raw FROM blobs WHERE id = ?1"
                                    : "SELECT p.name, b.offset, b.stored, b.raw FROM blobs b "
                                      "JOIN packs p ON p.id = b.pack WHERE b.id = ?1"));
    bind_bytes(*s, 1, digest_bytes(id));
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_DONE) return std::optional<BlobRef>();
    if (rc != SQLITE_ROW) return archive_fault(Error{impl_->failure("looking up a blob")});
    return std::optional<BlobRef>(read_ref(*s, 0));
  });
}

Expected<std::vector<std::pair<std::string, BlobRef>>> Catalog::all_blobs() const {
  return impl_->read([&]() -> Expected<std::vector<std::pair<std::string, BlobRef>>> {
    TRY_ASSIGN(auto s, impl_->statement(impl_->schema == 1
                                            ? "SELECT id, pack, offset, stored, raw FROM blobs "
                                              "ORDER BY pack, offset"
                                            : "SELECT b.id, p.name, b.offset, b.stored, b.raw "
                                              "FROM blobs b JOIN packs p ON p.id = b.pack "
                                              "ORDER BY b.pack, b.offset"));
    std::vector<std::pair<std::string, BlobRef>> out;
    int rc;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
      out.emplace_back(digest_hex(column_bytes(*s, 0)), read_ref(*s, 1));
    }
    if (rc != SQLITE_DONE) return archive_fault(Error{impl_->failure("listing blobs")});
    return out;
  });
}

Done Catalog::commit(const CatalogBatch& batch) {
  if (batch.empty()) return Ok{};
  // A failure of the commit is reported in the catalog's own words (unprefixed_message).
  auto transaction = sqlite::Transaction::begin(impl_->db);
  if (!transaction) return retry(unprefixed_message(transaction.fault()));
  impl_->writing = true;
  Done written = impl_->write(batch.blobs_, batch.versions_);
  if (written) written = transaction->commit();
  impl_->writing = false;
  if (!written) {  // rolled back as `transaction` ends
    impl_->node_ids.rolled_back();
    impl_->pack_ids.rolled_back();
    return retry(unprefixed_message(written.fault()));
  }
  // Committed: the ids the transaction added are now everyone's.
  impl_->node_ids.committed();
  impl_->pack_ids.committed();
  return Ok{};
}

}  // namespace tw::archive
