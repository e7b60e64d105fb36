// The whole path with real parts: timewarp enqueue -> PostgreSQL -> monitor -> scheduler ->
// real archivers -> archive -> timewarp restore.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <random>

#include "integration/monitor_fixture.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

TEST(EndToEnd, ThousandFilesEnqueuedArchivedAndRestoredByteForByte) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const auto source = dir / "source";
  const auto archive = dir / "archive";
  std::mt19937 rng(2026);
  std::vector<std::string> contents;
  for (int i = 0; i < 1000; ++i) {
    std::string content(rng() % 9000, '\0');
    for (auto& c : content) c = static_cast<char>(rng() & 0xFF);
    contents.push_back(content);
    test::write_file(source / fmt::format("d{}", i % 10) / fmt::format("file {}.bin", i), content);
  }
  // No --source: this test proves the enqueue path alone (the watcher has its own tests).
  test::MonitorProcess monitor(db, {"--backup-root=" + archive.string(), "--archivers=2",
                                    "--batch-size=100"});
  std::string out;
  ASSERT_EQ(test::run_command({test::cli_exe(), "--database=" + db.conninfo(), "enqueue",
                               source.string()}, &out), 0) << out;
  EXPECT_NE(out.find("enqueued 1000 items"), std::string::npos) << out;
  ASSERT_TRUE(test::wait_until([&] {
    return db.count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'") == 1000;
  }, 180s)) << db.scalar("SELECT string_agg(status || ':' || coalesce(last_error, ''), ', ') FROM timewarp.items WHERE status <> 'COMPLETED'");
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items WHERE archive_bytes > 0"), 1000 - 0 * 1);

  // Restore a spread of them (and change the source first, so the bytes must come from the
  // archive).
  for (int i : {0, 1, 7, 99, 500, 501, 998, 999}) {
    const auto original = source / fmt::format("d{}", i % 10) / fmt::format("file {}.bin", i);
    test::write_file(original, "changed since");
    const auto dest = dir / fmt::format("restored-{}.bin", i);
    ASSERT_EQ(test::run_command({test::cli_exe(), "--backup-root=" + archive.string(), "restore",
                                 original.string(), "--to", dest.string()}, &out), 0) << out;
    EXPECT_EQ(test::read_file(dest), contents[static_cast<std::size_t>(i)]) << "file " << i;
  }
  EXPECT_EQ(monitor.stop(), 0);
}

}  // namespace
}  // namespace tw
