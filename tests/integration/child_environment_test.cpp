// Children get only the environment they need. The scheduler connects to the database, so
// it gets the database string and keeps libpq's variables; the archivers never connect and
// take their configuration as arguments, so they get neither the database string nor a
// password nor anything else of the operator's environment beyond locale, time zone, PATH
// and sanitizer options, and they still archive.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "integration/monitor_harness.hpp"
#include "support/processes.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> value_of(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& entry : env) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

bool allowed_for_an_archiver(const std::string& name) {
  static const std::set<std::string> kNames = {"PATH",         "LANG",         "LANGUAGE",
                                               "TZ",           "ASAN_OPTIONS", "UBSAN_OPTIONS",
                                               "TSAN_OPTIONS", "LSAN_OPTIONS", "MSAN_OPTIONS"};
  return kNames.count(name) > 0 || name.rfind("LC_", 0) == 0;
}

TEST(ChildEnvironment, ArchiversGetNoDatabaseStringNoPasswordAndNothingElseOfOurs) {
  TW_REQUIRE_DATABASE();
  test::MonitorHarness h;
  // A password the server may not need (then libpq never sends it), or the one it does.
  const char* given = std::getenv("PGPASSWORD");
  const std::string password = given != nullptr && *given != '\0' ? given : "not-the-password";
  h.start({"--archivers=2"}, {{"PGPASSWORD", password},
                              {"TIMEWARP_MAX_ATTEMPTS", "3"},
                              {"UNRELATED_API_TOKEN", "s3cret"},
                              {"TZ", "UTC"},
                              {"LC_TIME", "C"}});
  ASSERT_TRUE(h.wait_catchup());
  std::vector<test::ProcessEntry> schedulers;
  std::vector<test::ProcessEntry> archivers;
  ASSERT_TRUE(test::wait_until(
      [&] {
        schedulers = test::live_children(h.pid(), "timewarp-schedu");
        if (schedulers.size() != 1) return false;
        archivers = test::live_children(schedulers.front().pid, "timewarp-archiv");
        // Right after its exec an archiver's /proc/PID/environ can still read empty.
        return archivers.size() == 2 &&
               std::all_of(archivers.begin(), archivers.end(), [](const auto& a) {
                 return !test::environment_of(a.pid).empty();
               });
      },
      30s))
      << schedulers.size() << " schedulers, " << archivers.size() << " archivers";

  const auto scheduler_env = test::environment_of(schedulers.front().pid);
  EXPECT_EQ(value_of(scheduler_env, "TIMEWARP_DATABASE"), h.db().conninfo());
  EXPECT_EQ(value_of(scheduler_env, "PGPASSWORD"), password);

  for (const auto& archiver : archivers) {
    const auto env = test::environment_of(archiver.pid);
    EXPECT_EQ(value_of(env, "TZ"), "UTC") << "pid " << archiver.pid;
    EXPECT_EQ(value_of(env, "LC_TIME"), "C") << "pid " << archiver.pid;
    for (const auto& entry : env) {
      const std::string name = entry.substr(0, entry.find('='));
      EXPECT_TRUE(allowed_for_an_archiver(name))
          << "archiver " << archiver.pid << " inherited " << name;
    }
    EXPECT_FALSE(value_of(env, "TIMEWARP_DATABASE"));
    EXPECT_FALSE(value_of(env, "PGPASSWORD"));
  }

  // Everything they need came as arguments: they still archive.
  const std::string file = h.path("after-start.txt");
  test::write_file(file, "archived by an archiver with a minimal environment");
  ASSERT_TRUE(h.wait_done("UPDATE", file));
  EXPECT_EQ(h.restore(file), "archived by an archiver with a minimal environment");
  EXPECT_EQ(h.failures(), "");
  EXPECT_EQ(h.stop(), 0);
}

}  // namespace
}  // namespace tw
