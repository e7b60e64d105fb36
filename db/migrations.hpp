// Versioned schema migrations (db/migrations/NNNN_name.sql, compiled in). Safe to run from
// several processes at once: they serialise on an advisory lock.
#pragma once

#include <string>
#include <vector>

#include "db/connection.hpp"

namespace tw::db {

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

const std::vector<Migration>& all_migrations();

// Applies every migration not yet applied, in version order, in one transaction. Returns the names
// of those applied now.
std::vector<std::string> migrate(Connection& conn);

// The newest schema version applied, 0 when none.
int schema_version(Connection& conn);

}  // namespace tw::db
