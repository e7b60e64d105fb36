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

TEST(EndToEnd, APathSpelledThroughALinkIsQueuedAndArchivedUnderItsRealFolder) {
  TW_REQUIRE_DATABASE();
  test::TestDatabase db;
  test::TempDir dir;
  const auto real = std::filesystem::weakly_canonical(dir / "real");
  test::write_file(real / "docs/a.txt", "a");
  test::write_file(real / "docs/sub/b.txt", "b");
  std::filesystem::create_directory_symlink(real, dir / "alias");
  std::filesystem::create_symlink("a.txt", real / "docs/link");
  const auto archive = dir / "archive";
  test::MonitorProcess monitor(db, {"--backup-root=" + archive.string(), "--archivers=1"});
  std::string out;
  // A file and a folder given through the link, and a link given as itself; the source
  // folder is configured through the link too.
  ASSERT_EQ(test::run_command({test::cli_exe(), "--database=" + db.conninfo(),
                               "--source=" + (dir / "alias").string(), "enqueue",
                               (dir / "alias/docs/a.txt").string(), (dir / "alias/docs/sub").string(),
                               (dir / "alias/docs/link").string()},
                              &out),
            0)
      << out;
  EXPECT_EQ(db.count("SELECT count(*) FROM timewarp.items"), 3);
  EXPECT_EQ(db.scalar("SELECT string_agg(path, ' ' ORDER BY path) FROM timewarp.items"),
            fmt::format("{0}/docs/a.txt {0}/docs/link {0}/docs/sub/b.txt", real.string()));
  EXPECT_EQ(db.scalar("SELECT string_agg(DISTINCT source_root, ' ') FROM timewarp.items"),
            real.string());
  ASSERT_TRUE(test::wait_until([&] {
    return db.count("SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'") == 3;
  }, 60s));
  // Archived as versions of what is there, not as tombstones of paths behind a link.
  for (const char* name : {"docs/a.txt", "docs/sub/b.txt"}) {
    const auto dest = dir / "restored" / name;
    ASSERT_EQ(test::run_command({test::cli_exe(), "--backup-root=" + archive.string(), "restore",
                                 (real / name).string(), "--to", dest.string()},
                                &out),
              0)
        << name << ": " << out;
    EXPECT_EQ(test::read_file(dest), test::read_file(real / name));
  }
  EXPECT_EQ(monitor.stop(), 0);
}

}  // namespace
}  // namespace tw
