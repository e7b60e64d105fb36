// History files: serialisation, and refusal of anything torn or altered.
#include <gtest/gtest.h>

#include "archiver/history.hpp"

namespace tw::archive {
namespace {

History sample() {
  History h;
  h.path = std::string("/odd\tname\n%\xff", 12);
  Version a;
  a.number = 1;
  a.archived_at_ns = 100;
  a.op = Op::Update;
  a.size = 3;
  a.sha256 = std::string(64, 'a');
  a.mode = 0100644;
  a.uid = 1000;
  a.gid = 100;
  a.mtime_ns = 99;
  Version b;
  b.number = 2;
  b.archived_at_ns = 200;
  b.op = Op::Update;
  b.size = 7;
  b.mode = 0120777;
  b.link_target = "tar\tget";
  Version c;
  c.number = 3;
  c.archived_at_ns = 300;
  c.op = Op::Move;
  c.moved_to = "/else where";
  h.versions = {a, b, c};
  return h;
}

TEST(History, RoundTrips) {
  const History h = sample();
  const std::string text = serialize_history(h);
  auto parsed = parse_history(text);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->path, h.path);
  ASSERT_EQ(parsed->versions.size(), 3u);
  EXPECT_EQ(parsed->versions[0].sha256, h.versions[0].sha256);
  EXPECT_EQ(parsed->versions[1].link_target, "tar\tget");
  EXPECT_TRUE(parsed->versions[1].is_symlink());
  EXPECT_FALSE(parsed->versions[2].exists());
  EXPECT_EQ(parsed->versions[2].moved_to, "/else where");
  EXPECT_EQ(serialize_history(*parsed), text);
}

TEST(History, DetectsTruncationAndAlteration) {
  const std::string text = serialize_history(sample());
  for (std::size_t cut = 0; cut < text.size(); cut += 7) {
    EXPECT_FALSE(parse_history(text.substr(0, cut))) << "cut at " << cut;
  }
  for (std::size_t i = 0; i < text.size(); i += 5) {
    std::string altered = text;
    altered[i] = static_cast<char>(altered[i] ^ 0x01);
    EXPECT_FALSE(parse_history(altered)) << "flipped byte " << i;
  }
}

TEST(History, SameStateComparesContentAndMetadata) {
  const History h = sample();
  Version x = h.versions[0];
  Version y = x;
  y.number = 9;
  y.op = Op::Stat;
  EXPECT_TRUE(same_state(x, y));
  y.mtime_ns += 1;
  EXPECT_FALSE(same_state(x, y));
  EXPECT_FALSE(same_state(h.versions[2], h.versions[2])) << "tombstones are never the same state";
}

}  // namespace
}  // namespace tw::archive
