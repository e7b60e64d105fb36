// Time text for --at and for `versions` output.
#include <cstdlib>

#include <gtest/gtest.h>

#include "archiver/timefmt.hpp"

namespace tw::archive {
namespace {

constexpr std::int64_t kSec = 1'000'000'000;

TEST(TimeFormat, FormatsUtcWithNanoseconds) {
  EXPECT_EQ(format_time_ns(0), "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(format_time_ns(1'795'428'000 * kSec + 5), "2026-11-23T10:00:00.000000005Z");
}

TEST(TimeFormat, ParsesIsoUtcOffsetsAndUnixSeconds) {
  EXPECT_EQ(*parse_time_ns("2026-11-22T10:00:00Z"), 1'795'341'600 * kSec);
  EXPECT_EQ(*parse_time_ns("2026-11-22T10:00:00.25Z"), 1'795'341'600 * kSec + kSec / 4);
  EXPECT_EQ(*parse_time_ns("2026-11-22T11:00:00+01:00"), 1'795'341'600 * kSec);
  EXPECT_EQ(*parse_time_ns("2026-11-22T09:00-0100"), 1'795'341'600 * kSec);
  EXPECT_EQ(*parse_time_ns("1795341600"), 1'795'341'600 * kSec);
  EXPECT_EQ(*parse_time_ns("@1795341600.5"), 1'795'341'600 * kSec + kSec / 2);
  // A printed time parses back to itself.
  const std::int64_t t = 1'795'341'600 * kSec + 123'456'789;
  EXPECT_EQ(*parse_time_ns(format_time_ns(t)), t);
}

TEST(TimeFormat, NoZoneMeansLocalTime) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(*parse_time_ns("2026-11-22T10:00:00"), 1'795'341'600 * kSec);
  EXPECT_EQ(*parse_time_ns("2026-11-22 10:00:00"), 1'795'341'600 * kSec);
  EXPECT_EQ(*parse_time_ns("2026-11-22"), 1'795'305'600 * kSec);
  ::setenv("TZ", "Europe/Paris", 1);
  ::tzset();
  EXPECT_EQ(*parse_time_ns("2026-11-22T11:00:00"), 1'795'341'600 * kSec);
  ::unsetenv("TZ");
  ::tzset();
}

TEST(TimeFormat, RefusesNonsense) {
  for (const char* bad : {"", "yesterday", "2026-13-01", "2026-11-22T25:00", "2026-11-22T10:00:00Q",
                          "12abc", "2026-1-2"}) {
    EXPECT_FALSE(parse_time_ns(bad)) << bad;
  }
}

}  // namespace
}  // namespace tw::archive
