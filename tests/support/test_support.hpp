// Shared test support: a fresh PostgreSQL database per test on the real server named by
// TIMEWARP_TEST_DATABASE (scripts/test starts one), temporary directories, bounded polling,
// and the paths of the built executables.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "db/connection.hpp"

namespace tw::test {

// Creates a uniquely named database, migrated to the current schema, and drops it at the
// end. Skips the test (GTEST_SKIP in the caller) when no server is configured.
class TestDatabase {
 public:
  TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;
  ~TestDatabase();

  // Connection string for the test's own database.
  const std::string& conninfo() const { return conninfo_; }
  db::Connection connect() const { return db::Connection(conninfo_); }
  // An SQL shortcut for assertions: the first column of the first row, as text.
  std::string scalar(const std::string& sql) const;
  std::int64_t count(const std::string& sql) const { return std::stoll(scalar(sql)); }

  static bool available();

 private:
  std::string admin_conninfo_;
  std::string name_;
  std::string conninfo_;
};

class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds(10));

// Built executables (from compile definitions set in tests/CMakeLists.txt).
std::string monitor_exe();
std::string scheduler_exe();
std::string archiver_exe();
std::string cli_exe();
std::string fake_archiver_exe();
// timewarp-scheduler with the test hooks of support/hooked_scheduler.cpp.
std::string hooked_scheduler_exe();

void write_file(const std::filesystem::path& path, const std::string& content);
std::string read_file(const std::filesystem::path& path);

// `size` bytes from a generator seeded with `seed`: content that does not compress (stored
// as it is, so its stored bytes are its size).
std::string noise(std::size_t size, std::uint64_t seed);

// Runs a command, capturing its stdout (stderr passes through); returns the exit code.
int run_command(const std::vector<std::string>& argv, std::string* output = nullptr,
                const std::vector<std::pair<std::string, std::string>>& env = {});

}  // namespace tw::test

#define TW_REQUIRE_DATABASE()                                                 \
  do {                                                                        \
    if (!::tw::test::TestDatabase::available())                               \
      GTEST_SKIP() << "TIMEWARP_TEST_DATABASE is not set (run scripts/test)"; \
  } while (0)
