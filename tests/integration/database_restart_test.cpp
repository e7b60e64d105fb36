// The PostgreSQL server restarted in the middle of a drain: every item still ends COMPLETED
// exactly once. Needs the server's data directory (TW_PG_DATADIR, exported by
// scripts/test) and runs alone, since it takes the shared server down for a moment.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>

#include "integration/scheduler_fixture.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

// Restarts the server with pg_ctl, as the user that owns the data directory.
int restart_server(const std::string& datadir) {
  std::string bindir;
  if (test::run_command({"/usr/bin/pg_config", "--bindir"}, &bindir) != 0) return -1;
  while (!bindir.empty() && (bindir.back() == '\n' || bindir.back() == ' ')) bindir.pop_back();
  struct stat st {};
  if (::stat(datadir.c_str(), &st) != 0) return -1;
  std::string as_owner;
  if (st.st_uid != ::geteuid()) {
    std::string owner;
    test::run_command({"/usr/bin/stat", "-c", "%U", datadir}, &owner);
    while (!owner.empty() && owner.back() == '\n') owner.pop_back();
    as_owner = "/usr/sbin/runuser -u '" + owner + "' -- ";
  }
  // The new postmaster must not inherit our pipe, or reading it would never end.
  return test::run_command({"/bin/sh", "-c",
                            as_owner + "\"$0\" -D \"$1\" restart -m fast -w -t 60 >/dev/null 2>&1",
                            bindir + "/pg_ctl", datadir});
}

TEST(DatabaseRestart, MidDrainEveryItemCompletesExactlyOnce) {
  TW_REQUIRE_DATABASE();
  const char* datadir = std::getenv("TW_PG_DATADIR");
  if (datadir == nullptr || *datadir == '\0') GTEST_SKIP() << "TW_PG_DATADIR is not set (run scripts/test)";
  test::TestDatabase db;
  test::SchedulerFixture f(db);
  f.fill(3000);
  auto scheduler = f.start({"--archivers=2", "--batch-size=200", "--archiver-arg=--delay-ms=1"});
  ASSERT_TRUE(scheduler->write_line("READY"));
  ASSERT_TRUE(test::wait_until([&] { return f.count("status = 'COMPLETED'") >= 300; }, 120s));
  ASSERT_EQ(restart_server(datadir), 0);
  std::string line;
  ASSERT_EQ(scheduler->read_line(line, 240s), ChildProcess::ReadStatus::Line);
  EXPECT_EQ(line, "READY");
  EXPECT_EQ(f.count("status = 'COMPLETED'"), 3000);
  const auto runs = f.runs();
  EXPECT_EQ(runs.size(), 3000u);
  for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << "item " << id << " ran " << n << " times";
  ASSERT_TRUE(scheduler->write_line("STOP"));
  EXPECT_EQ(scheduler->wait_exit(30s), 0);
}

}  // namespace
}  // namespace tw
