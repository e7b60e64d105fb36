// The small shared helpers of common/: archiver counts, line fields, time conversions,
// directory listing.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/archivers.hpp"
#include "common/dirs.hpp"
#include "common/fd.hpp"
#include "common/host.hpp"
#include "common/text.hpp"
#include "common/time.hpp"

namespace tw {
namespace {

TEST(Archivers, OneRangeFromOneTo256) {
  EXPECT_EQ(parse_archivers("1"), 1);
  EXPECT_EQ(parse_archivers("256"), kMaxArchivers);
  for (const char* bad : {"0", "257", "-1", "+3", " 3", "3 ", "3.0", "", "x", "99999999999"}) {
    EXPECT_FALSE(parse_archivers(bad)) << bad;
  }
}

TEST(Text, SplitKeepsEmptyPiecesAndParseIntTakesWholeFieldsOnly) {
  EXPECT_EQ(split("a\t\tb", '\t'), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(split("", '\t'), (std::vector<std::string_view>{""}));
  EXPECT_EQ(split("a\t", '\t'), (std::vector<std::string_view>{"a", ""}));
  EXPECT_EQ(parse_int<int>("42"), 42);
  EXPECT_EQ(parse_int<unsigned>("755", 8), 0755u);
  EXPECT_FALSE(parse_int<int>(""));
  EXPECT_FALSE(parse_int<int>("4x"));
  EXPECT_FALSE(parse_int<std::uint8_t>("256"));
  EXPECT_FALSE(parse_int<unsigned>("-1"));
}

TEST(Time, Conversions) {
  EXPECT_EQ(seconds_ms(1.5).count(), 1500);
  EXPECT_EQ(seconds_of(std::chrono::milliseconds(250)), 0.25);
  EXPECT_EQ(timespec_ns({3, 5}), 3'000'000'005);
  const timespec t = ns_timespec(-1'500'000'000);
  EXPECT_EQ(t.tv_sec, -2);
  EXPECT_EQ(t.tv_nsec, 500'000'000);
  EXPECT_EQ(timespec_ns(ns_timespec(-1'500'000'000)), -1'500'000'000);
  EXPECT_DOUBLE_EQ(timespec_seconds({2, 250'000'000}), 2.25);
  EXPECT_GT(now_ns(), 1'600'000'000LL * kNsPerSecond);
  EXPECT_NEAR(epoch_seconds(), static_cast<double>(now_ns()) / 1e9, 5.0);
  EXPECT_FALSE(hostname().empty());
}

TEST(Dirs, NamesSortedWithoutDotsAndTheCallersDescriptorStaysUsable) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tw-dirs-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "b");
  std::ofstream(dir / "c");
  std::ofstream(dir / "a");
  const std::vector<std::string> expected{"a", "b", "c"};
  auto by_path = directory_names(dir.string());
  ASSERT_TRUE(by_path);
  EXPECT_EQ(*by_path, expected);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  for (int round = 0; round < 2; ++round) {
    auto names = directory_names(fd.get());
    ASSERT_TRUE(names);
    EXPECT_EQ(*names, expected) << "round " << round;
  }
  auto absent = directory_names((dir / "none").string());
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.failure().value, ENOENT);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tw
