#include "common/protocol.hpp"

#include <gtest/gtest.h>

namespace tw {
namespace {

TEST(Protocol, RequestRoundTrip) {
  Request move{42, Op::Move, "/a/x%09y", "/b/z", {}};
  const auto parsed = parse_request(format_request(move));
  ASSERT_TRUE(std::holds_alternative<Request>(parsed));
  const auto& r = std::get<Request>(parsed);
  EXPECT_EQ(r.id, 42);
  EXPECT_EQ(r.op, Op::Move);
  EXPECT_EQ(r.path, "/a/x%09y");
  EXPECT_EQ(r.dest_path, "/b/z");
  EXPECT_EQ(format_request({7, Op::Update, "/f", "", {}}), "7\tUPDATE\t/f");
  const auto scan = parse_request("9\tSCAN\t/d\tnewest=9");
  ASSERT_TRUE(std::holds_alternative<Request>(scan));
  EXPECT_EQ(std::get<Request>(scan).op, Op::Scan);
  EXPECT_EQ(std::get<Request>(scan).path, "/d");
  EXPECT_EQ(std::get<Request>(scan).order.newest, 9);
  EXPECT_EQ(format_request({9, Op::Scan, "/d", "", {}}), "9\tSCAN\t/d");
}

TEST(Protocol, RequestsCarryTheirPlaceInTheQueueAsOptionalTaggedFields) {
  Request update{7, Op::Update, "/d/a=b", "", QueueOrder{12, 30}};
  EXPECT_EQ(format_request(update), "7\tUPDATE\t/d/a=b\tnewest=12\thorizon=30");
  const auto parsed = parse_request(format_request(update));
  ASSERT_TRUE(std::holds_alternative<Request>(parsed));
  EXPECT_EQ(std::get<Request>(parsed).path, "/d/a=b");
  EXPECT_EQ(std::get<Request>(parsed).order.newest, 12);
  EXPECT_EQ(std::get<Request>(parsed).order.horizon, 30);
  // Either, in any order, after a MOVE's destination too; neither is needed.
  const auto move = parse_request("8\tMOVE\t/a\t/b=c\thorizon=9");
  ASSERT_TRUE(std::holds_alternative<Request>(move));
  EXPECT_EQ(std::get<Request>(move).dest_path, "/b=c");
  EXPECT_EQ(std::get<Request>(move).order.newest, 0);
  EXPECT_EQ(std::get<Request>(move).order.horizon, 9);
  const auto bare = parse_request("9\tDELETE\t/a");
  ASSERT_TRUE(std::holds_alternative<Request>(bare));
  EXPECT_EQ(std::get<Request>(bare).order.newest, 0);
  EXPECT_EQ(std::get<Request>(bare).order.horizon, 0);
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
  EXPECT_NE(error("5\tUPDATE\t/x\tfresh=3").message.find("unknown field 'fresh=3'"),
            std::string::npos);
  EXPECT_NE(error("5\tUPDATE\t/x\tnewest=-3").message.find("bad or repeated"), std::string::npos);
  EXPECT_NE(error("5\tUPDATE\t/x\tnewest=3\tnewest=4").message.find("bad or repeated"),
            std::string::npos);
  EXPECT_NE(error("5\tMOVE\t/x\tnewest=3").message.find("MOVE takes 4 fields"), std::string::npos);
  EXPECT_NE(error("5\tUPDATE\tnewest=3\t/x").message.find("takes 3 fields"), std::string::npos);
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
