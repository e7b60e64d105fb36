#include "common/line_buffer.hpp"

#include <gtest/gtest.h>

namespace tw {
namespace {

using Status = LineBuffer::Status;

TEST(LineBuffer, SplitsLinesAcrossAppends) {
  LineBuffer lines(16);
  std::string line;
  EXPECT_EQ(lines.next(line), Status::NeedMore);
  lines.append("one\ntw");
  EXPECT_TRUE(lines.ready());
  EXPECT_EQ(lines.next(line), Status::Line);
  EXPECT_EQ(line, "one");
  EXPECT_FALSE(lines.ready());
  EXPECT_EQ(lines.next(line), Status::NeedMore);
  lines.append("o\n\nthree");
  EXPECT_EQ(lines.next(line), Status::Line);
  EXPECT_EQ(line, "two");
  EXPECT_EQ(lines.next(line), Status::Line);
  EXPECT_EQ(line, "");
  EXPECT_EQ(lines.next(line), Status::NeedMore);
  EXPECT_TRUE(lines.take_unterminated(line));
  EXPECT_EQ(line, "three");
  EXPECT_FALSE(lines.take_unterminated(line));
}

TEST(LineBuffer, AnOverlongLineIsReportedOnceAsSoonAsItPassesTheCap) {
  LineBuffer lines(8, 3);
  std::string line;
  lines.append("12345678");  // exactly the cap: still a line once its newline comes
  EXPECT_EQ(lines.next(line), Status::NeedMore);
  lines.append("\n123456789");
  EXPECT_EQ(lines.next(line), Status::Line);
  EXPECT_EQ(line, "12345678");
  EXPECT_TRUE(lines.ready());
  EXPECT_EQ(lines.next(line), Status::Overlong);
  EXPECT_EQ(line, "123") << "only the kept start";
  lines.append("more of the same line");
  EXPECT_FALSE(lines.ready());
  EXPECT_EQ(lines.next(line), Status::NeedMore) << "the tail is not a second report";
  EXPECT_FALSE(lines.take_unterminated(line)) << "nor is it a last line";
  lines.append(" end\nnext\n");
  EXPECT_TRUE(lines.ready());
  EXPECT_EQ(lines.next(line), Status::Line);
  EXPECT_EQ(line, "next");
}

TEST(LineBuffer, AnOverlongLineArrivingWholeIsOverlongToo) {
  LineBuffer lines(4);
  std::string line;
  lines.append("abcdefgh\nok\n");
  EXPECT_EQ(lines.next(line), Status::Overlong);
  EXPECT_EQ(line, "");
  EXPECT_EQ(lines.next(line), Status::Line);
  EXPECT_EQ(line, "ok");
}

}  // namespace
}  // namespace tw
