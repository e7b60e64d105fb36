#include "db/connection.hpp"

#include <charconv>

#include <fmt/format.h>

#include "common/mask_conninfo.hpp"

namespace tw::db {
namespace {

// A message of libpq's (trimmed) with every password masked: the one way its errors reach
// ours. `conninfo`: the connection string the message is about, which libpq may quote in
// part when it could not read it.
std::string libpq_message(const char* message, std::string_view conninfo = {}) {
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return mask_conninfo(text, conninfo);
}

}  // namespace

std::int64_t PgResult::int64(int row, int col) const {
  const auto value = text(row, col);
  std::int64_t out = 0;
  std::from_chars(value.data(), value.data() + value.size(), out);
  return out;
}

double PgResult::float8(int row, int col) const {
  return std::stod(std::string(text(row, col)));
}

std::optional<std::int64_t> PgResult::opt_int64(int row, int col) const {
  if (is_null(row, col)) return std::nullopt;
  return int64(row, col);
}

std::optional<double> PgResult::opt_float8(int row, int col) const {
  if (is_null(row, col)) return std::nullopt;
  return float8(row, col);
}

std::int64_t PgResult::affected() const {
  const char* n = PQcmdTuples(result_.get());
  return n && *n ? std::stoll(n) : 0;
}

std::string describe_conninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (error) PQfreemem(error);
  std::string host, port, dbname, user;
  if (options) {
    for (auto* o = options; o->keyword; ++o) {
      if (!o->val) continue;
      const std::string_view key = o->keyword;
      if (key == "host" || (key == "hostaddr" && host.empty())) host = o->val;
      if (key == "port") port = o->val;
      if (key == "dbname") dbname = o->val;
      if (key == "user") user = o->val;
    }
    PQconninfoFree(options);
  }
  const auto env_or = [](const std::string& value, const char* env, const char* fallback) {
    if (!value.empty()) return value;
    const char* from_env = std::getenv(env);
    return std::string(from_env && *from_env ? from_env : fallback);
  };
  return fmt::format("host={} port={} dbname={} user={}", env_or(host, "PGHOST", "(local socket)"),
                     env_or(port, "PGPORT", "5432"), env_or(dbname, "PGDATABASE", "(default)"),
                     env_or(user, "PGUSER", "(default)"));
}

// The description goes through the masking too: from a password with an unencoded '@',
// libpq reads part of the password as the host name.
Connection::Connection(const std::string& conninfo)
    : description_(mask_conninfo(describe_conninfo(conninfo), conninfo)) {
  conn_.reset(PQconnectdb(conninfo.c_str()));
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) {
    const std::string why =
        conn_ ? libpq_message(PQerrorMessage(conn_.get()), conninfo) : "out of memory";
    throw BrokenConnection(fmt::format("cannot connect to database ({}): {}", description_, why));
  }
  // Session set-up: quiet notices, UTC timestamps for stable output.
  PQsetNoticeProcessor(conn_.get(), [](void*, const char*) {}, nullptr);
  exec("SET client_min_messages = warning; SET TIME ZONE 'UTC'");
}

Param Connection::to_param(double v) { return fmt::format("{}", v); }

namespace {

// Parameter values as libpq takes them (NULL for SQL NULL).
std::vector<const char*> c_strings(const std::vector<Param>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

}  // namespace

PgResult Connection::exec(const std::string& sql, const std::vector<Param>& params) {
  const auto values = c_strings(params);
  // Without parameters, PQexec allows several statements (migrations need that).
  PGresult* raw = params.empty()
                      ? PQexec(conn_.get(), sql.c_str())
                      : PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(params.size()),
                                     nullptr, values.data(), nullptr, nullptr, 0);
  return checked(raw, sql);
}

PgResult Connection::exec_prepared(const std::string& sql, const std::vector<Param>& params) {
  auto found = statements_.find(sql);
  if (found == statements_.end()) {
    const std::string name = fmt::format("tw_{}", statements_.size() + 1);
    checked(PQprepare(conn_.get(), name.c_str(), sql.c_str(), static_cast<int>(params.size()),
                      nullptr),
            sql);
    found = statements_.emplace(sql, name).first;
  }
  const auto values = c_strings(params);
  return checked(PQexecPrepared(conn_.get(), found->second.c_str(), static_cast<int>(params.size()),
                                values.data(), nullptr, nullptr, 0),
                 sql);
}

namespace {

// The first words of a statement, whitespace folded, for an error message.
std::string statement_summary(std::string_view sql) {
  constexpr std::size_t kMost = 100;
  std::string out;
  bool space = false;
  for (const char c : sql) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
    if (out.size() >= kMost) {
      out += "...";
      break;
    }
  }
  return out;
}

}  // namespace

PgResult Connection::checked(PGresult* raw, std::string_view sql) {
  PgResult result(raw);
  const auto status = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  if (!raw || PQstatus(conn_.get()) != CONNECTION_OK) {
    throw BrokenConnection(fmt::format("database connection lost ({}): {}", description_,
                                       libpq_message(PQerrorMessage(conn_.get()))));
  }
  const char* state = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
  std::string sqlstate = state ? state : "";
  // Class 08 (connection exception) and 57P01..57P03 (server shutting down) mean the
  // connection is gone or going.
  if (sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03") {
    throw BrokenConnection(fmt::format("database connection lost ({}): {}", description_,
                                       libpq_message(PQresultErrorMessage(raw))));
  }
  throw SqlError(libpq_message(PQresultErrorMessage(raw)), std::move(sqlstate),
                 statement_summary(sql));
}

void Connection::listen(const std::string& channel) {
  char* quoted = PQescapeIdentifier(conn_.get(), channel.c_str(), channel.size());
  const std::string sql = fmt::format("LISTEN {}", quoted ? quoted : channel);
  if (quoted) PQfreemem(quoted);
  exec(sql);
}

std::vector<Notification> Connection::consume_notifications() {
  std::vector<Notification> out;
  if (PQconsumeInput(conn_.get()) == 0) {
    throw BrokenConnection(fmt::format("database connection lost ({}): {}", description_,
                                       libpq_message(PQerrorMessage(conn_.get()))));
  }
  while (PGnotify* n = PQnotifies(conn_.get())) {
    out.push_back({n->relname ? n->relname : "", n->extra ? n->extra : ""});
    PQfreemem(n);
  }
  return out;
}

std::string array_literal(const std::vector<Param>& elements) {
  std::string out = "{";
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (i) out.push_back(',');
    if (!elements[i]) {
      out += "NULL";
      continue;
    }
    out.push_back('"');
    for (char c : *elements[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

}  // namespace tw::db
