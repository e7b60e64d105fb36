#include "common/escape.hpp"

#include <gtest/gtest.h>

#include <random>

namespace tw {
namespace {

TEST(Escape, LeavesPlainAndUtf8TextAlone) {
  EXPECT_EQ(escape_bytes("/home/ann/notes v2.txt"), "/home/ann/notes v2.txt");
  EXPECT_EQ(escape_bytes("/tmp/caf\xC3\xA9/\xE2\x82\xAC/\xF0\x9F\x98\x80"),
            "/tmp/caf\xC3\xA9/\xE2\x82\xAC/\xF0\x9F\x98\x80");
}

TEST(Escape, EscapesControlBytesPercentAndDel) {
  EXPECT_EQ(escape_bytes("a\tb\nc%d\x7F" "e"), "a%09b%0Ac%25d%7Fe");
  EXPECT_EQ(escape_bytes(std::string("x\0y", 3)), "x%00y");
}

TEST(Escape, EscapesEveryByteOfInvalidUtf8) {
  EXPECT_EQ(escape_bytes("\xFF\xFE"), "%FF%FE");
  EXPECT_EQ(escape_bytes("\xC3"), "%C3");                  // truncated sequence
  EXPECT_EQ(escape_bytes("\xC0\xAF"), "%C0%AF");           // overlong '/'
  EXPECT_EQ(escape_bytes("\xED\xA0\x80"), "%ED%A0%80");    // surrogate
  EXPECT_EQ(escape_bytes("\xF4\x90\x80\x80"), "%F4%90%80%80");  // past U+10FFFF
  EXPECT_EQ(escape_bytes("\xC3\xA9\xA9"), "\xC3\xA9%A9");  // stray continuation byte
}

TEST(Escape, RoundTripsEveryByteString) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    std::string raw(rng() % 24, '\0');
    for (auto& c : raw) c = static_cast<char>(rng() & 0xFF);
    const std::string escaped = escape_bytes(raw);
    EXPECT_EQ(escaped.find('\t'), std::string::npos);
    EXPECT_EQ(escaped.find('\n'), std::string::npos);
    const auto back = unescape_bytes(escaped);
    ASSERT_TRUE(back.has_value()) << escaped;
    EXPECT_EQ(*back, raw);
  }
}

TEST(Escape, RejectsMalformedEscapedText) {
  EXPECT_FALSE(unescape_bytes("%"));
  EXPECT_FALSE(unescape_bytes("%4"));
  EXPECT_FALSE(unescape_bytes("%G0"));
  EXPECT_FALSE(unescape_bytes("a\tb"));
  EXPECT_FALSE(unescape_bytes("\xFF"));
  EXPECT_EQ(unescape_bytes("%41%2f"), "A/");
}

}  // namespace
}  // namespace tw
