// History files: serialisation, and refusal of anything torn or altered.
#include <gtest/gtest.h>

#include "archive/format1/history.hpp"

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

TEST(History, DifferenceIsTheOneDefinitionOfUnchanged) {
  const History h = sample();
  const Version& file = h.versions[0];
  Version now = file;
  now.number = 9;
  now.op = Op::Stat;
  now.archived_at_ns = 12345;
  now.dev = 7;  // a file put back in place is unchanged
  now.ino = 8;
  EXPECT_EQ(difference(&file, now), Difference::None);
  now.sha256.clear();  // content not read: size and mtime stand for it
  EXPECT_EQ(difference(&file, now), Difference::None);
  EXPECT_EQ(difference(nullptr, now), Difference::Content);
  EXPECT_EQ(difference(&h.versions[2], now), Difference::Content) << "a tombstone is not live";
  EXPECT_EQ(difference(&h.versions[1], now), Difference::Content) << "a link became a file";

  const auto changed = [&](auto change) {
    Version v = file;
    change(v);
    return difference(&file, v);
  };
  EXPECT_EQ(changed([](Version& v) { v.mtime_ns += 1; }), Difference::Content);
  EXPECT_EQ(changed([](Version& v) { v.size += 1; }), Difference::Content);
  EXPECT_EQ(changed([](Version& v) { v.sha256 = std::string(64, 'b'); }), Difference::Content);
  EXPECT_EQ(changed([](Version& v) { v.mode = 0100600; }), Difference::Metadata);
  EXPECT_EQ(changed([](Version& v) { v.mode = 0104644; }), Difference::Metadata) << "set-uid";
  EXPECT_EQ(changed([](Version& v) { v.uid = 0; }), Difference::Metadata);
  EXPECT_EQ(changed([](Version& v) { v.gid = 0; }), Difference::Metadata);

  const Version& link = h.versions[1];
  Version other = link;
  other.link_target = "tar\tgot";
  EXPECT_EQ(difference(&link, other), Difference::Content);
  other = link;
  other.mtime_ns += 1;
  EXPECT_EQ(difference(&link, other), Difference::Content);

  Version dir;
  dir.mode = 040755;
  dir.mtime_ns = 5;
  Version dir_now = dir;
  dir_now.mtime_ns = 6;  // an entry came or went
  EXPECT_EQ(difference(&dir, dir_now), Difference::Metadata);
  dir_now = dir;
  dir_now.size = 4096;  // a directory's size is not compared
  EXPECT_EQ(difference(&dir, dir_now), Difference::None);
}

}  // namespace
}  // namespace tw::archive
