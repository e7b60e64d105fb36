// The SQLite layer beneath format 2's catalog (catalog.hpp): a connection that prepares each
// statement once, statements reset as soon as their caller is done with them, write
// transactions, and how long a writer waits for another process's lock. Internal to the
// archive library; one Database belongs to one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "archive/expected.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace tw::archive::sqlite {

// How long a writer waits for another process's transaction before it gives up (RETRY).
inline constexpr std::chrono::milliseconds kBusyTimeout{60'000};

// A prepared statement in use: reset when it goes out of scope, so that no read
// transaction stays open after the caller is done (an open one would keep every later
// checkpoint from emptying the WAL, which would then grow without bound).
class Cursor {
 public:
  explicit Cursor(sqlite3_stmt* s) : s_(s) {}
  Cursor(Cursor&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}
  Cursor& operator=(Cursor&&) = delete;
  ~Cursor();
  operator sqlite3_stmt*() const { return s_; }  // NOLINT(google-explicit-constructor)
  // The statement too, so that `*s` reads the same whether `s` is the Cursor or the
  // Expected it came in.
  sqlite3_stmt* operator*() const { return s_; }

 private:
  sqlite3_stmt* s_;
};

// Column `column` of the current row as bytes (empty when NULL).
std::string column_bytes(sqlite3_stmt* s, int column);
void bind_bytes(sqlite3_stmt* s, int index, std::string_view bytes);
void bind_text(sqlite3_stmt* s, int index, std::string_view text);
// A nullable column: NULL when `bytes` is empty.
void bind_optional(sqlite3_stmt* s, int index, std::string_view bytes);

class Database {
 public:
  // Opens `file` (writable: created when absent) for use by one thread at a time, a writer
  // waiting kBusyTimeout for another process's lock.
  static Expected<Database> open(const std::string& file, bool writable);

  sqlite3* handle() const { return db_.get(); }
  const std::string& file() const { return file_; }
  // "catalog <file>: <what>: <SQLite's message>", for the error that just happened (the
  // message of every failure here, as archive_fault: a RETRY).
  std::string failure(std::string_view what) const;

  // The prepared statement for `sql` (prepared on its first use, kept), bindings cleared.
  Expected<Cursor> statement(std::string_view sql);
  // Drops the prepared statements (the tables they name have changed).
  void forget_statements() { statements_.clear(); }
  // Runs `sql` (one or more statements, no results), compiled anew each time.
  Done exec(const char* sql);
  // Runs the one statement `sql` (no results) from the prepared ones: BEGIN and COMMIT
  // open and close a read many times a second, and compiling them cost as much as running.
  Done run(std::string_view sql);
  // PRAGMA user_version: the schema version the file says it has.
  Expected<int> user_version();
  // The rowid of the row the last INSERT added.
  std::int64_t last_insert_rowid() const;
  // Folds the WAL into the database and empties it, waiting up to `wait` for other
  // connections to let go of it: false when one did not.
  Expected<bool> checkpoint(std::chrono::milliseconds wait);

 private:
  struct Close {
    void operator()(sqlite3* db) const;
  };
  struct Finalize {
    void operator()(sqlite3_stmt* s) const;
  };
  // How long a connection waits for another's lock, and since when (the busy handler's).
  struct BusyWait {
    std::chrono::milliseconds limit = kBusyTimeout;
    std::chrono::steady_clock::time_point since;
  };
  static int on_busy(void* wait, int tries);
  Database() = default;

  std::unique_ptr<BusyWait> busy_;  // on the heap: the handler keeps its address
  std::unique_ptr<sqlite3, Close> db_;
  std::string file_;
  std::map<std::string, std::unique_ptr<sqlite3_stmt, Finalize>, std::less<>> statements_;
};

// A write transaction, begun IMMEDIATE: the write lock is taken first, so the transaction
// never fails half-way on a lock another writer took meanwhile. Rolled back when it ends
// before commit() succeeded.
class Transaction {
 public:
  static Expected<Transaction> begin(Database& db);
  Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Done commit();

 private:
  explicit Transaction(Database& db) : db_(&db) {}
  Database* db_;  // null once committed
};

}  // namespace tw::archive::sqlite
