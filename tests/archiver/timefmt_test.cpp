// Time text for --at and for `versions` output.
#include <cstdlib>

#include <gtest/gtest.h>

#include "archive/timefmt.hpp"

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

// Expects `text` refused with a message quoting it and holding `why`.
void expect_refused(const std::string& text, std::string_view why) {
  const auto parsed = parse_time_ns(text);
  ASSERT_FALSE(parsed) << text << " read as " << format_time_ns(*parsed);
  EXPECT_NE(parsed.error().find("'" + text + "'"), std::string::npos) << parsed.error();
  EXPECT_NE(parsed.error().find(why), std::string::npos) << parsed.error();
}

// Zoned and local forms alike (TZ=UTC for the local ones, so the same text is valid or not).
class TimeRanges : public testing::Test {
 protected:
  void SetUp() override {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
  void TearDown() override {
    ::unsetenv("TZ");
    ::tzset();
  }
};

TEST_F(TimeRanges, RefusesDaysAMonthDoesNotHave) {
  for (const std::string zone : {"", "Z", "+01:00"}) {
    expect_refused("2026-02-31T10:00" + zone, "2026-02 has no day 31");
    expect_refused("2026-02-29T10:00" + zone, "2026-02 has no day 29");
    expect_refused("2100-02-29T10:00" + zone, "2100-02 has no day 29");  // not a leap year
    expect_refused("2026-04-31T10:00" + zone, "2026-04 has no day 31");
    expect_refused("2026-01-00T10:00" + zone, "has no day 00");
    expect_refused("2026-01-32T10:00" + zone, "has no day 32");
    expect_refused("2026-00-10T10:00" + zone, "no month 00");
    expect_refused("2026-13-01T10:00" + zone, "no month 13");
  }
  expect_refused("2026-02-31", "2026-02 has no day 31");
  EXPECT_EQ(*parse_time_ns("2024-02-29T00:00:00Z"), 1'709'164'800 * kSec);
  EXPECT_EQ(*parse_time_ns("2000-02-29T00:00:00Z"), 951'782'400 * kSec);
  EXPECT_EQ(*parse_time_ns("2026-01-31T00:00:00Z"), 1'769'817'600 * kSec);
}

TEST_F(TimeRanges, RefusesHoursMinutesAndSecondsOutOfRange) {
  for (const std::string zone : {"", "Z"}) {
    expect_refused("2026-11-22T24:00" + zone, "hour 24");
    expect_refused("2026-11-22T99:00" + zone, "hour 99");
    expect_refused("2026-11-22T10:60" + zone, "minute 60");
    expect_refused("2026-11-22T10:00:60" + zone, "second 60");
    expect_refused("2026-11-22T10:00:99" + zone, "second 99");
  }
  EXPECT_EQ(*parse_time_ns("2026-11-22T23:59:59Z"), (1'795'305'600 + 86'399) * kSec);
}

TEST_F(TimeRanges, RefusesZoneOffsetsBeyondADay) {
  for (const char* zone : {"+99:99", "+24:00", "-24:00", "+23:60", "-00:60", "+9999", "+12:99"}) {
    expect_refused(std::string("2026-11-22T10:00:00") + zone, "-23:59 to +23:59");
  }
  EXPECT_EQ(*parse_time_ns("2026-11-22T23:59:00+23:59"), 1'795'305'600 * kSec);
  EXPECT_EQ(*parse_time_ns("2026-11-21T00:01-2359"), 1'795'305'600 * kSec);
}

TEST_F(TimeRanges, RefusesInstantsBeyondTheNanosecondRange) {
  for (const char* text : {"2300-01-01Z", "2300-01-01", "2300-01-01T00:00:00+01:00", "9999-12-31Z",
                           "0000-01-01Z", "1600-01-01", "1677-09-21T00:12:43Z",
                           "1677-09-21T00:12:43.145224191Z", "2262-04-11T23:47:16.854775808Z",
                           "2262-04-12", "9223372037", "-9223372037",
                           "9223372036.854775808", "-9223372036.854775809",
                           "99999999999999999999", "-99999999999999999999"}) {
    expect_refused(text, "out of range");
  }
  EXPECT_EQ(*parse_time_ns("2262-04-11T23:47:16.854775807Z"), INT64_MAX);
  EXPECT_EQ(*parse_time_ns("1677-09-21T00:12:43.145224192Z"), INT64_MIN);
  EXPECT_EQ(*parse_time_ns("2262-04-11T23:47:16.854775807"), INT64_MAX);  // TZ=UTC
  EXPECT_EQ(*parse_time_ns("9223372036.854775807"), INT64_MAX);
  EXPECT_EQ(*parse_time_ns("-9223372036.854775808"), INT64_MIN);
  EXPECT_EQ(format_time_ns(INT64_MAX), "2262-04-11T23:47:16.854775807Z");
  EXPECT_EQ(format_time_ns(INT64_MIN), "1677-09-21T00:12:43.145224192Z");
}

TEST(TimeFormat, NegativeUnixFractionsCountBackwards) {
  EXPECT_EQ(*parse_time_ns("-0.5"), -kSec / 2);
  EXPECT_EQ(*parse_time_ns("-1.25"), -kSec - kSec / 4);
  EXPECT_EQ(*parse_time_ns("-0"), 0);
  EXPECT_EQ(*parse_time_ns(format_time_ns(-kSec / 2)), -kSec / 2);
}

TEST(TimeFormat, AFractionNeedsADigit) {
  EXPECT_FALSE(parse_time_ns("2026-11-22T10:00:00.Z"));
  EXPECT_FALSE(parse_time_ns("2026-11-22T10:00:00."));
}

}  // namespace
}  // namespace tw::archive
