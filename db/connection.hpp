// RAII over libpq: one Connection per thread (a Connection is not thread-safe). Every value
// goes through parameters. Errors are exceptions sorted as libpqxx sorts them, so callers
// retry only what is retryable: BrokenConnection (reconnect, then retry) and SqlError
// (retryable() for serialization failures and deadlocks). Messages never show a password.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <string_view>
#include <vector>

namespace tw::db {

class DbError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The connection failed or was lost; the statement may or may not have run.
class BrokenConnection : public DbError {
 public:
  using DbError::DbError;
};

// The server refused a statement.
class SqlError : public DbError {
 public:
  SqlError(const std::string& message, std::string sqlstate, std::string statement = {})
      : DbError(message), sqlstate_(std::move(sqlstate)), statement_(std::move(statement)) {}
  const std::string& sqlstate() const { return sqlstate_; }
  // The start of the statement that failed, on one line, for messages.
  const std::string& statement() const { return statement_; }
  // A state of the server, not of the statement: the same statement may succeed if run
  // again. Class 40 (serialization failure, deadlock), 53 (too many connections, out of
  // memory or disk), 55P03 (lock not available) and 57014 (statement timeout).
  bool retryable() const {
    return sqlstate_.rfind("40", 0) == 0 || sqlstate_.rfind("53", 0) == 0 ||
           sqlstate_ == "55P03" || sqlstate_ == "57014";
  }

 private:
  std::string sqlstate_;
  std::string statement_;
};

// A statement parameter: text, or NULL.
using Param = std::optional<std::string>;

class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result, &PQclear) {}
  int rows() const { return PQntuples(result_.get()); }
  bool is_null(int row, int col) const { return PQgetisnull(result_.get(), row, col) != 0; }
  std::string_view text(int row, int col) const {
    return {PQgetvalue(result_.get(), row, col),
            static_cast<std::size_t>(PQgetlength(result_.get(), row, col))};
  }
  std::int64_t int64(int row, int col) const;
  double float8(int row, int col) const;
  std::optional<std::int64_t> opt_int64(int row, int col) const;
  std::optional<double> opt_float8(int row, int col) const;
  // Rows changed by INSERT/UPDATE/DELETE.
  std::int64_t affected() const;

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> result_;
};

struct Notification {
  std::string channel;
  std::string payload;
};

class Connection {
 public:
  // Connects; throws BrokenConnection naming the host, port and database (never the
  // password) when the server cannot be reached.
  explicit Connection(const std::string& conninfo);
  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() = default;

  PgResult exec(const std::string& sql, const std::vector<Param>& params = {});
  template <class... Args>
  PgResult query(const std::string& sql, const Args&... args) {
    return exec(sql, std::vector<Param>{to_param(args)...});
  }
  // As exec(), through a statement prepared on this connection the first time `sql` is
  // run (one statement, parameters only): later runs skip parsing, and PostgreSQL may
  // reuse a generic plan when it costs no more than a fresh one. For the hot statements
  // run again and again (claims, completions).
  PgResult exec_prepared(const std::string& sql, const std::vector<Param>& params);
  template <class... Args>
  PgResult prepared(const std::string& sql, const Args&... args) {
    return exec_prepared(sql, std::vector<Param>{to_param(args)...});
  }

  // Runs `fn` inside BEGIN/COMMIT, rolling back if it throws.
  template <class Fn>
  auto transaction(Fn&& fn) {
    return transaction("BEGIN", std::forward<Fn>(fn));
  }
  // Runs `fn` in one read-only snapshot: every read inside sees the same moment.
  template <class Fn>
  auto snapshot(Fn&& fn) {
    return transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", std::forward<Fn>(fn));
  }
  template <class Fn>
  auto transaction(const char* begin, Fn&& fn) {
    exec(begin);
    try {
      if constexpr (std::is_void_v<decltype(fn())>) {
        fn();
        exec("COMMIT");
      } else {
        auto result = fn();
        exec("COMMIT");
        return result;
      }
    } catch (...) {
      if (PQstatus(conn_.get()) == CONNECTION_OK) PQclear(PQexec(conn_.get(), "ROLLBACK"));
      throw;
    }
  }

  void listen(const std::string& channel);
  // Reads what the server sent without blocking and returns the notifications received.
  std::vector<Notification> consume_notifications();
  // The connection's socket, to poll for notifications.
  int socket() const { return PQsocket(conn_.get()); }
  bool healthy() const { return PQstatus(conn_.get()) == CONNECTION_OK; }
  // "host=... port=... dbname=...", for messages.
  const std::string& describe() const { return description_; }
  PGconn* native() { return conn_.get(); }

  static Param to_param(std::nullptr_t) { return std::nullopt; }
  static Param to_param(const std::string& v) { return v; }
  static Param to_param(std::string_view v) { return std::string(v); }
  static Param to_param(const char* v) { return std::string(v); }
  static Param to_param(bool v) { return std::string(v ? "true" : "false"); }
  static Param to_param(double v);
  template <class T>
    requires std::is_integral_v<T>
  static Param to_param(T v) { return std::to_string(v); }
  template <class T>
  static Param to_param(const std::optional<T>& v) {
    return v ? to_param(*v) : std::nullopt;
  }

 private:
  // Returns `raw` as a result, or throws BrokenConnection / SqlError for a failed one
  // (`sql`: the statement, named in the error).
  PgResult checked(PGresult* raw, std::string_view sql);

  std::unique_ptr<PGconn, decltype(&PQfinish)> conn_{nullptr, &PQfinish};
  std::string description_;
  std::unordered_map<std::string, std::string> statements_;  // SQL text -> prepared name
};

// "host=H port=P dbname=D user=U" for a connection string or URI, without the password.
std::string describe_conninfo(const std::string& conninfo);

// Builds a PostgreSQL array literal ('{"a","b",NULL}') for one array parameter.
std::string array_literal(const std::vector<Param>& elements);
template <class T>
std::string int_array_literal(const std::vector<T>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out.push_back(',');
    out += std::to_string(values[i]);
  }
  out.push_back('}');
  return out;
}

}  // namespace tw::db
