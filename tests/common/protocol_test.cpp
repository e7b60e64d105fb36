#include "common/protocol.hpp"

#include <gtest/gtest.h>

namespace tw {
namespace {

TEST(Protocol, RequestRoundTrip) {
  Request move{42, Op::Move, "/a/x%09y", "/b/z"};
  const auto parsed = parse_request(format_request(move));
  ASSERT_TRUE(std::holds_alternative<Request>(parsed));
  const auto& r = std::get<Request>(parsed);
  EXPECT_EQ(r.id, 42);
  EXPECT_EQ(r.op, Op::Move);
  EXPECT_EQ(r.path, "/a/x%09y");
  EXPECT_EQ(r.dest_path, "/b/z");
  EXPECT_EQ(format_request({7, Op::Update, "/f", ""}), "7\tUPDATE\t/f");
}

TEST(Protocol, MalformedRequestsSayWhatIsWrong) {
  const auto error = [](std::string_view line) {
    const auto parsed = parse_request(line);
    EXPECT_TRUE(std::holds_alternative<RequestParseError>(parsed)) << line;
    return std::get<RequestParseError>(parsed);
  };
  EXPECT_EQ(error("").id, kUnknownRequestId);
  EXPECT_NE(error("abc\tUPDATE\t/x").message.find("bad item id"), std::string::npos);
  EXPECT_EQ(error("5\tFROB\t/x").id, 5);
  EXPECT_NE(error("5\tFROB\t/x").message.find("unknown op"), std::string::npos);
  EXPECT_NE(error("5\tUPDATE").message.find("expected"), std::string::npos);
  EXPECT_NE(error("5\tMOVE\t/x").message.find("MOVE takes 4 fields"), std::string::npos);
  EXPECT_NE(error("5\tUPDATE\t/x\t/y").message.find("takes 3 fields"), std::string::npos);
  EXPECT_NE(error("5\tUPDATE\t/x%zz").message.find("badly escaped"), std::string::npos);
  EXPECT_NE(error("5\tUPDATE\t").message.find("empty path"), std::string::npos);
}

TEST(Protocol, ResponsesRoundTripWithEscapedMessages) {
  Response failed{9, Outcome::FailedRetry, 0, 0, "busy\twhile\nreading 100%"};
  const auto line = format_response(failed);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto parsed = parse_response(line);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->outcome, Outcome::FailedRetry);
  EXPECT_EQ(parsed->message, failed.message);

  auto complete = parse_response("3\tCOMPLETE\t1024\t77");
  ASSERT_TRUE(complete.ok());
  EXPECT_EQ(complete->archive_bytes, 1024u);
  EXPECT_EQ(complete->cpu_us, 77u);
}

TEST(Protocol, GarbageResponsesAreErrorsNotCrashes) {
  for (const char* line : {"", "garbage", "1\tCOMPLETE\tx\t1", "1\tFAILED\tMAYBE\tm",
                           "1\tDONE\t1\t1", "-1\tCOMPLETE\t1\t1", "1\tCOMPLETE\t1"}) {
    EXPECT_FALSE(parse_response(line).ok()) << line;
  }
}

}  // namespace
}  // namespace tw
