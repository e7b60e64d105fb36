// What the operator's tool shows people (common/human.hpp): local times with the zone said
// once or per row, the database's UTC text read back, aligned tables, and a progress line
// that a terminal shows and a pipe never sees.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/fd.hpp"
#include "common/human.hpp"

namespace tw {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kSecond = 1'000'000'000;
// 2026-11-22T10:00:00Z, in winter in central Europe.
constexpr std::int64_t kWinter = 1'795'341'600 * kSecond;
// 2026-07-01T12:00:00Z, in summer.
constexpr std::int64_t kSummer = 1'782'907'200 * kSecond;

// Sets TZ for one test (a POSIX rule, so no zone database is needed), and back after.
class LocalZone {
 public:
  explicit LocalZone(const char* zone) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    ::setenv("TZ", zone, 1);
    ::tzset();
  }
  ~LocalZone() {
    if (old_.empty()) {
      ::unsetenv("TZ");
    } else {
      ::setenv("TZ", old_.c_str(), 1);
    }
    ::tzset();
  }

 private:
  std::string old_;
};

constexpr const char* kCentralEurope = "CET-1CEST,M3.5.0,M10.5.0/3";

TEST(Human, LocalTimeToTheSecondAndTheZoneOffset) {
  LocalZone zone(kCentralEurope);
  EXPECT_EQ(local_time_text(kWinter), "2026-11-22 11:00:00");
  EXPECT_EQ(local_time_text(kWinter + kSecond - 1), "2026-11-22 11:00:00") << "cut, not rounded";
  EXPECT_EQ(zone_offset_text(kWinter), "+01:00");
  EXPECT_EQ(local_time_text(kSummer), "2026-07-01 14:00:00");
  EXPECT_EQ(zone_offset_text(kSummer), "+02:00");
  // Before 1970: the second before, not after.
  LocalZone utc("UTC0");
  EXPECT_EQ(local_time_text(-1), "1969-12-31 23:59:59");
  EXPECT_EQ(zone_offset_text(0), "+00:00");
  LocalZone west("NST3:30");
  EXPECT_EQ(zone_offset_text(kWinter), "-03:30");
}

TEST(Human, LocalTimesSayASharedZoneOnceAndOtherwiseOnEachRow) {
  LocalZone zone(kCentralEurope);
  const auto winter = local_times({kWinter, std::nullopt, kWinter + 60 * kSecond});
  EXPECT_EQ(winter.zone, "+01:00");
  EXPECT_EQ(winter.texts,
            (std::vector<std::string>{"2026-11-22 11:00:00", "-", "2026-11-22 11:01:00"}));
  const auto both = local_times({kSummer, kWinter});
  EXPECT_EQ(both.zone, "");
  EXPECT_EQ(both.texts,
            (std::vector<std::string>{"2026-07-01 14:00:00 +02:00", "2026-11-22 11:00:00 +01:00"}));
  EXPECT_TRUE(local_times({}).texts.empty());
  EXPECT_EQ(zone_header("TIME", winter), "TIME (UTC+01:00)");
  EXPECT_EQ(zone_header("TIME", both), "TIME");
  LocalZone utc("UTC0");
  EXPECT_EQ(zone_header("TIME", local_times({kWinter})), "TIME (UTC)");
}

TEST(Human, UtcTextOfTheDatabaseIsReadBack) {
  EXPECT_EQ(utc_text_ns("2026-11-22T10:00:00.123Z"), kWinter + 123'000'000);
  EXPECT_EQ(utc_text_ns("2026-11-22T10:00:00Z"), kWinter);
  EXPECT_EQ(utc_text_ns("2026-11-22 10:00:00"), kWinter);
  EXPECT_EQ(utc_text_ns("2026-11-22T10:00:00.000000001Z"), kWinter + 1);
  for (const char* bad : {"", "2026-11-22", "2026-11-22T10:00:00.Z", "2026-11-22T10:00:00+01",
                          "2026/11/22T10:00:00Z", "2026-11-22T1x:00:00Z"}) {
    EXPECT_FALSE(utc_text_ns(bad)) << bad;
  }
}

TEST(Human, TableAlignsColumnsAndNeverPadsTheLastCell) {
  EXPECT_EQ(table_text({{"N", "NAME", "PATH"}, {"10", "a", "/x"}, {"7", "long name", "/y/z"}},
                       {true, false}),
            " N  NAME       PATH\n"
            "10  a          /x\n"
            " 7  long name  /y/z\n");
}

// What `fd` holds to read within `wait` (the master side of a terminal, or a pipe).
std::string read_ready(int fd, std::chrono::milliseconds wait) {
  std::string out;
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, static_cast<int>(wait.count())) > 0) {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    wait = 50ms;
  }
  return out;
}

// A pseudo-terminal: `terminal` is what a program writes to, `master` what it shows. Both
// unset when none can be had.
struct Pty {
  UniqueFd master;
  UniqueFd terminal;
};
Pty open_pty() {
  Pty pty;
  pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.master || ::grantpt(pty.master.get()) != 0 || ::unlockpt(pty.master.get()) != 0) {
    return {};
  }
  pty.terminal.reset(::open(::ptsname(pty.master.get()), O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.terminal) return {};
  return pty;
}

TEST(Human, ProgressLineIsRewrittenOnATerminalAndClearedAtTheEnd) {
  const Pty pty = open_pty();
  ASSERT_TRUE(pty.terminal) << "no pseudo-terminal";
  int calls = 0;  // read by the line's thread only, until stop() joined it
  ProgressLine line([&calls] { return "step " + std::to_string(++calls); }, pty.terminal.get(),
                    20ms);
  EXPECT_TRUE(line.on_terminal());
  std::this_thread::sleep_for(150ms);
  line.stop();
  line.stop();  // idempotent
  const std::string shown = read_ready(pty.master.get(), 500ms);
  EXPECT_GE(calls, 2);
  EXPECT_EQ(shown.rfind("\r", 0), 0u) << shown;
  EXPECT_NE(shown.find("\rstep 1\x1b[K"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\rstep 2\x1b[K"), std::string::npos) << shown;
  EXPECT_EQ(shown.find('\n'), std::string::npos) << "one line, rewritten";
  EXPECT_EQ(shown.substr(shown.size() - 4), "\r\x1b[K") << "cleared at the end";
}

TEST(Human, ProgressLineShowsNothingOnAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  bool asked = false;
  {
    ProgressLine line(
        [&asked] {
          asked = true;
          return std::string("step");
        },
        write_end.get(), 1ms);
    EXPECT_FALSE(line.on_terminal());
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(asked);
  EXPECT_EQ(read_ready(read_end.get(), 50ms), "");
}

// Work that ends before the first redraw still showed what ran: drawn at once, then cleared.
TEST(Human, ProgressLineIsDrawnAtOnceOnATerminal) {
  const Pty pty = open_pty();
  ASSERT_TRUE(pty.terminal) << "no pseudo-terminal";
  {
    ProgressLine line([] { return std::string("step"); }, pty.terminal.get(), 10s);
    EXPECT_TRUE(line.on_terminal());
  }
  EXPECT_EQ(read_ready(pty.master.get(), 100ms), "\rstep\x1b[K\r\x1b[K");
}

}  // namespace
}  // namespace tw
