#include "db/migrations.hpp"

#include <set>

#include <spdlog/spdlog.h>

namespace tw::db {
namespace {
// Any constant will do; it names the lock every migrating process takes.
constexpr std::int64_t kMigrationLock = 0x54696d6557617270;  // "TimeWarp"
}  // namespace

int schema_version(Connection& conn) {
  auto exists = conn.query("SELECT to_regclass('timewarp.schema_migrations') IS NOT NULL");
  if (exists.text(0, 0) != "t") return 0;
  auto version = conn.query("SELECT coalesce(max(version), 0) FROM timewarp.schema_migrations");
  return static_cast<int>(version.int64(0, 0));
}

std::vector<std::string> migrate(Connection& conn) {
  std::vector<std::string> applied;
  conn.transaction([&] {
    conn.query("SELECT pg_advisory_xact_lock($1)", kMigrationLock);
    conn.exec("CREATE SCHEMA IF NOT EXISTS timewarp");
    conn.exec(
        "CREATE TABLE IF NOT EXISTS timewarp.schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    std::set<std::int64_t> done;
    auto rows = conn.exec("SELECT version FROM timewarp.schema_migrations");
    for (int r = 0; r < rows.rows(); ++r) done.insert(rows.int64(r, 0));
    for (const auto& m : all_migrations()) {
      if (done.count(m.version)) continue;
      spdlog::info("applying migration {:04d} {}", m.version, m.name);
      conn.exec(m.sql);
      conn.query("INSERT INTO timewarp.schema_migrations (version, name) VALUES ($1, $2)",
                 m.version, m.name);
      applied.push_back(m.name);
    }
  });
  return applied;
}

}  // namespace tw::db
