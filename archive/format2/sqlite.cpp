// The SQLite layer beneath format 2's catalog (sqlite.hpp).
#include "archive/format2/sqlite.hpp"

#include <sqlite3.h>

#include <thread>

#include <fmt/format.h>

#include "common/escape.hpp"

namespace tw::archive::sqlite {

Cursor::~Cursor() {
  if (s_ != nullptr) sqlite3_reset(s_);
}

std::string column_bytes(sqlite3_stmt* s, int column) {
  const void* data = sqlite3_column_blob(s, column);
  const int size = sqlite3_column_bytes(s, column);
  return data == nullptr ? std::string() : std::string(static_cast<const char*>(data), size);
}

void bind_bytes(sqlite3_stmt* s, int index, std::string_view bytes) {
  sqlite3_bind_blob64(s, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
}

void bind_text(sqlite3_stmt* s, int index, std::string_view text) {
  sqlite3_bind_text(s, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

void bind_optional(sqlite3_stmt* s, int index, std::string_view bytes) {
  if (bytes.empty()) {
    sqlite3_bind_null(s, index);
  } else {
    bind_bytes(s, index, bytes);
  }
}

void Database::Close::operator()(sqlite3* db) const { sqlite3_close_v2(db); }
void Database::Finalize::operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }

Expected<Database> Database::open(const std::string& file, bool writable) {
  Database out;
  out.file_ = file;
  const int flags = (writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
                    SQLITE_OPEN_NOMUTEX;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
  out.db_.reset(raw);  // even on failure: it holds the message
  if (rc != SQLITE_OK) return archive_fault(Error{out.failure("opening")});
  out.busy_ = std::make_unique<BusyWait>();
  sqlite3_busy_handler(raw, on_busy, out.busy_.get());
  sqlite3_extended_result_codes(raw, 1);
  return out;
}

int Database::on_busy(void* wait, int tries) {
  auto& busy = *static_cast<BusyWait*>(wait);
  const auto now = std::chrono::steady_clock::now();
  if (tries == 0) busy.since = now;
  if (now - busy.since >= busy.limit) return 0;
  // Short naps first: another archiver's commit holds the write lock for a few milliseconds,
  // and SQLite's own timeout sleeps 1, 2, 5, 10, 15 ms... (in a first backup of small files,
  // two archivers slept so half a second of their 6, measured).
  using std::chrono::microseconds;
  std::this_thread::sleep_for(tries < 20    ? microseconds(100)
                              : tries < 100 ? microseconds(500)
                                            : microseconds(2000));
  return 1;
}

std::string Database::failure(std::string_view what) const {
  return fmt::format("catalog {}: {}: {}", shown_path(file_), what, sqlite3_errmsg(db_.get()));
}

Expected<Cursor> Database::statement(std::string_view sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v3(db_.get(), sql.data(), static_cast<int>(sql.size()),
                           SQLITE_PREPARE_PERSISTENT, &raw, nullptr) != SQLITE_OK) {
      return archive_fault(Error{failure("preparing a statement")});
    }
    it = statements_.emplace(std::string(sql), raw).first;
  }
  sqlite3_clear_bindings(it->second.get());
  return Cursor(it->second.get());
}

Done Database::exec(const char* sql) {
  if (sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return archive_fault(Error{failure(sql)});
  }
  return Ok{};
}

Done Database::run(std::string_view sql) {
  TRY_ASSIGN(auto s, statement(sql));
  const int rc = sqlite3_step(*s);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return archive_fault(Error{failure(sql)});
  return Ok{};
}

Expected<int> Database::user_version() {
  TRY_ASSIGN(auto s, statement("PRAGMA user_version"));
  if (sqlite3_step(*s) != SQLITE_ROW) {
    return archive_fault(Error{failure("reading the catalog's version")});
  }
  return sqlite3_column_int(*s, 0);
}

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

Expected<bool> Database::checkpoint(std::chrono::milliseconds wait) {
  busy_->limit = wait;
  const int rc =
      sqlite3_wal_checkpoint_v2(db_.get(), "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  busy_->limit = kBusyTimeout;
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return false;
  if (rc != SQLITE_OK) return archive_fault(Error{failure("folding the journal into the catalog")});
  return true;
}

Expected<Transaction> Transaction::begin(Database& db) {
  TRY(db.run("BEGIN IMMEDIATE"));
  return Transaction(db);
}

Transaction::~Transaction() {
  if (db_ != nullptr) (void)db_->run("ROLLBACK");
}

Done Transaction::commit() {
  TRY(db_->run("COMMIT"));
  db_ = nullptr;
  return Ok{};
}

}  // namespace tw::archive::sqlite
