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

TEST(Escape, MachineFormKeepsC1AndBidiCodePointsAsTheyAre) {
  // The pipes, the database and the histories stay exact: only what a person reads changes.
  EXPECT_EQ(escape_bytes("a\xC2\x9B"
                         "b\xE2\x80\xAE"
                         "c"),
            "a\xC2\x9B"
            "b\xE2\x80\xAE"
            "c");
}

TEST(ShownPath, EscapesC0C1AndBidiControlsForPeople) {
  EXPECT_EQ(shown_path("plain/caf\xC3\xA9 100%"), "plain/caf\xC3\xA9 100%25");
  EXPECT_EQ(shown_path("a\x1B[31m\n"), "a%1B[31m%0A");
  EXPECT_EQ(shown_path("\xC2\x80|\xC2\x85|\xC2\x9B|\xC2\x9F"), "%C2%80|%C2%85|%C2%9B|%C2%9F");
  EXPECT_EQ(shown_path("\x80\x9B\x9F"), "%80%9B%9F");           // C1 bytes that are not UTF-8
  EXPECT_EQ(shown_path("\xC2\xA0\xC2\x7F"), "\xC2\xA0%C2%7F");  // U+00A0 is text
  EXPECT_EQ(shown_path("evil\xE2\x80\xAEtxt.exe"), "evil%E2%80%AEtxt.exe");  // U+202E
  for (const char* bidi :
       {"\xD8\x9C", "\xE2\x80\x8E", "\xE2\x80\x8F", "\xE2\x80\xAA", "\xE2\x80\xAB", "\xE2\x80\xAC",
        "\xE2\x80\xAD", "\xE2\x80\xAE", "\xE2\x81\xA6", "\xE2\x81\xA7", "\xE2\x81\xA8",
        "\xE2\x81\xA9", "\xE2\x80\xA8", "\xE2\x80\xA9"}) {
    const std::string shown = shown_path(bidi);
    EXPECT_EQ(shown.size(), 3 * std::string(bidi).size()) << shown;
    EXPECT_EQ(shown.front(), '%') << shown;
  }
  // Neighbours that are ordinary text stay as they are.
  for (const char* text : {"\xE2\x80\x8D", "\xE2\x80\xAF", "\xE2\x81\xA5", "\xE2\x81\xAA",
                           "\xD8\x9B", "\xE2\x80\x90"}) {
    EXPECT_EQ(shown_path(text), text);
  }
}

TEST(ShownPath, StaysEscapedTextThatGivesTheBytesBack) {
  std::mt19937 rng(2468);
  const std::string pieces[] = {"\xC2\x9B", "\xE2\x80\xAE", "\xE2\x81\xA6", "%",    "a",
                                "\xC3\xA9", "\x9B",         "\n",           "\xE2", "\x80"};
  for (int i = 0; i < 20000; ++i) {
    std::string raw;
    for (int k = static_cast<int>(rng() % 8); k > 0; --k) raw += pieces[rng() % std::size(pieces)];
    const std::string shown = shown_path(raw);
    EXPECT_EQ(unescape_bytes(shown), raw) << shown;
    EXPECT_EQ(shown_text(shown), shown) << "showing it again changes nothing";
    EXPECT_EQ(shown_text(escape_bytes(raw)), shown) << "the stored form shows the same";
  }
}

TEST(ShownText, EscapesControlsButLeavesPercentAndEscapesAlone) {
  EXPECT_EQ(shown_text("100% done: /a%09b"), "100% done: /a%09b");
  EXPECT_EQ(shown_text("x\x1B[2J\xC2\x9B"
                       "y\xE2\x80\xAEz\xFF"),
            "x%1B[2J%C2%9By%E2%80%AEz%FF");
}

TEST(ShownText, CutsLongTextBetweenCharactersAndEscapes) {
  EXPECT_EQ(shown_text("a\x1b[31mb\n"), "a%1B[31mb%0A");
  EXPECT_EQ(shown_text("été 100%"), "été 100%");
  EXPECT_EQ(shown_text("abcdefgh", 3), "abc...");
  EXPECT_EQ(shown_text("abcdefgh", 8), "abcdefgh");
  EXPECT_EQ(shown_text("ab\x01" "cd", 3), "ab...") << "not inside %01";
  EXPECT_EQ(shown_text("aé", 2), "a...") << "not inside a UTF-8 character";
}

}  // namespace
}  // namespace tw
