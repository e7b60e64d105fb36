// The pure presentation helpers of `timewarp status`: durations, the progress bar, text
// safe for a terminal, the estimate, and colour only when asked.
#include <gtest/gtest.h>

#include "cli/status_view.hpp"

namespace tw::cli {
namespace {

TEST(StatusView, Durations) {
  EXPECT_EQ(duration(0.25), "250ms");
  EXPECT_EQ(duration(12.34), "12.3s");
  EXPECT_EQ(duration(187), "3m07s");
  EXPECT_EQ(duration(7500), "2h05m");
  EXPECT_EQ(duration(3 * 86400 + 4 * 3600 + 5), "3d04h");
  EXPECT_EQ(duration(-3), "0ms");
}

TEST(StatusView, ProgressBar) {
  EXPECT_EQ(progress_bar(0, 10), "[----------]");
  EXPECT_EQ(progress_bar(0.5, 10), "[#####-----]");
  EXPECT_EQ(progress_bar(0.99, 10), "[#########-]");
  EXPECT_EQ(progress_bar(1, 10), "[##########]");
  EXPECT_EQ(progress_bar(7, 4), "[####]");
  EXPECT_EQ(progress_bar(-1, 4), "[----]");
}

TEST(StatusView, DrainEstimate) {
  db::QueueCounts c;
  EXPECT_EQ(drain_eta(c), 0.0);
  c.claimable = 100;
  EXPECT_FALSE(drain_eta(c).has_value());
  c.completed_last_minute = 600;  // 10/s
  c.dispatched = 20;
  EXPECT_DOUBLE_EQ(completion_rate(c), 10.0);
  EXPECT_DOUBLE_EQ(*drain_eta(c), 12.0);
}

db::StatusReport sample() {
  db::StatusReport r;
  r.time = "2024-05-01T12:00:00.000Z";
  r.counts.claimable = 3;
  r.counts.failed = 1;
  r.counts.failed_last_hour = 1;
  db::ItemRecord f;
  f.id = 9;
  f.op = "UPDATE";
  f.path = "/p";
  f.status = "FAILED";
  f.attempts = 5;
  f.last_error = "boom";
  f.finished_age = 30;
  r.recent_failures.push_back(f);
  return r;
}

TEST(StatusView, ColourOnlyWhenAsked) {
  ViewOptions plain;
  const auto text = status_text(sample(), plain);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_NE(text.find("  #9 30.0s ago  UPDATE /p (5 attempts)\n      boom\n"), std::string::npos)
      << text;
  ViewOptions colour;
  colour.color = true;
  const auto painted = status_text(sample(), colour);
  EXPECT_NE(painted.find("\x1b[1mTimeWarp status at 2024-05-01T12:00:00.000Z\x1b[0m"),
            std::string::npos);
  EXPECT_NE(painted.find("\x1b[33mnone running (is timewarp-monitor started?)\x1b[0m"),
            std::string::npos);
}

TEST(StatusView, JsonShape) {
  ViewOptions options;
  options.database = "host=h";
  WatchProgress watch{4, 12, 3};
  const auto doc = status_json(sample(), options, &watch);
  EXPECT_EQ(doc.at("database"), "host=h");
  EXPECT_EQ(doc.at("backlog").at("total"), 3);
  EXPECT_TRUE(doc.at("progress").at("drain_eta_seconds").is_null());
  EXPECT_EQ(doc.at("failures").at("recent").at(0).at("error"), "boom");
  EXPECT_EQ(doc.at("watch").at("frame"), 3);
  EXPECT_DOUBLE_EQ(doc.at("watch").at("fraction_done").get<double>(), 0.25);
  // Invalid UTF-8 never makes the output fail.
  auto bad = sample();
  bad.recent_failures[0].last_error = "\xff\xfe";
  EXPECT_NO_THROW(dump_json(status_json(bad, options), 2));
}

}  // namespace
}  // namespace tw::cli
