// The SQLite layer beneath format 2's catalog (sqlite.hpp).
#include "archive/format2/sqlite.hpp"

#include <sqlite3.h>

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
  sqlite3_busy_timeout(raw, static_cast<int>(kBusyTimeout.count()));
  sqlite3_extended_result_codes(raw, 1);
  return out;
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

Expected<int> Database::user_version() {
  TRY_ASSIGN(auto s, statement("PRAGMA user_version"));
  if (sqlite3_step(*s) != SQLITE_ROW) {
    return archive_fault(Error{failure("reading the catalog's version")});
  }
  return sqlite3_column_int(*s, 0);
}

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

Expected<bool> Database::checkpoint(std::chrono::milliseconds wait) {
  sqlite3* db = db_.get();
  sqlite3_busy_timeout(db, static_cast<int>(wait.count()));
  const int rc =
      sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  sqlite3_busy_timeout(db, static_cast<int>(kBusyTimeout.count()));
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return false;
  if (rc != SQLITE_OK) return archive_fault(Error{failure("folding the journal into the catalog")});
  return true;
}

Expected<Transaction> Transaction::begin(Database& db) {
  TRY(db.exec("BEGIN IMMEDIATE"));
  return Transaction(db);
}

Transaction::~Transaction() {
  if (db_ != nullptr) (void)db_->exec("ROLLBACK");
}

Done Transaction::commit() {
  TRY(db_->exec("COMMIT"));
  db_ = nullptr;
  return Ok{};
}

}  // namespace tw::archive::sqlite
