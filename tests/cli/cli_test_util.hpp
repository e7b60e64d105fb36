// Helpers for the operator-command tests: run `timewarp` against a test database, parse its
// JSON, and put the queue into known states with plain SQL.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/test_support.hpp"

namespace tw::test {

// Runs `timewarp --database=<db> args...`; returns the exit code, stdout in *out.
inline int run_cli(const TestDatabase& db, std::vector<std::string> args, std::string* out,
                   const std::vector<std::pair<std::string, std::string>>& env = {}) {
  args.insert(args.begin(), {cli_exe(), "--database=" + db.conninfo()});
  return run_command(args, out, env);
}

// Runs a command that must succeed and print one JSON document; returns it parsed.
inline nlohmann::json cli_json(const TestDatabase& db, std::vector<std::string> args) {
  std::string out;
  const int code = run_cli(db, std::move(args), &out);
  EXPECT_EQ(code, 0) << out;
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "):\n" << out;
    return nlohmann::json::object();
  }
}

inline void sql(const TestDatabase& db, const std::string& statement) {
  auto conn = db.connect();
  conn.exec(statement);
}

// `n` NEW items at /data/<prefix>-<i>; returns nothing (ids follow insertion order).
inline void insert_items(const TestDatabase& db, int n, const std::string& prefix,
                         const std::string& status = "NEW", const std::string& extra_columns = "",
                         const std::string& extra_values = "") {
  sql(db, "INSERT INTO timewarp.items (op, path, status" + extra_columns +
              ") SELECT 'UPDATE', '/data/" + prefix + "-' || g, '" + status + "'" + extra_values +
              " FROM generate_series(1, " + std::to_string(n) + ") g");
}

inline std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

}  // namespace tw::test
