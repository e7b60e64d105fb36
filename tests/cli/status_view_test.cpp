// The pure presentation helpers of `timewarp status`: durations, the progress bar, text
// safe for a terminal, the estimate, colour only when asked, byte counts and the archive's
// section.
#include <gtest/gtest.h>

#include "cli/status_view.hpp"

namespace tw::cli {
namespace {

using archive::CollectReport;

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

TEST(StatusView, Bytes) {
  EXPECT_EQ(bytes_text(0), "0 bytes");
  EXPECT_EQ(bytes_text(1), "1 byte");
  EXPECT_EQ(bytes_text(1023), "1023 bytes");
  EXPECT_EQ(bytes_text(1536), "1.5 KiB");
  EXPECT_EQ(bytes_text(1024 * 1024 - 1), "1.0 MiB");
  EXPECT_EQ(bytes_text(12ULL << 30), "12.0 GiB");
  EXPECT_EQ(bytes_text(~0ULL), "16.0 EiB");
}

ArchiveStatus sample_archive() {
  ArchiveStatus a;
  a.root = "/srv/tw";
  a.format = 2;
  a.read_at = "2024-05-01T12:00:00.000000000Z";
  a.read_seconds = 0.5;
  archive::SpaceReport& s = a.space.emplace();
  s.content_files = 3;
  s.content_bytes = 3ULL << 30;
  s.catalog_bytes = 512ULL << 20;
  s.blobs = 1000;
  s.live_blobs = 900;
  s.live_bytes = 2ULL << 30;
  s.dead_bytes = 1ULL << 30;
  s.freed_blobs = 50;
  s.freed_bytes = 256ULL << 20;
  a.versions = 5000;
  a.removable = 120;
  a.removable_paths = 7;
  return a;
}

TEST(StatusView, ArchiveSection) {
  ArchiveStatus a = sample_archive();
  std::string text = archive_text(a, 0, {});
  // Fresh figures: no line of their age.
  EXPECT_EQ(text,
            "\n"
            "archive     /srv/tw (format 2): 3.5 GiB, of which 3.0 GiB in 3 packs and 512.0 MiB "
            "of catalog\n"
            "live        2.0 GiB in 900 blobs that versions name; a collection could give back "
            "about 1.0 GiB now\n"
            "retention   the policy would remove 120 of 5000 versions now, freeing about "
            "256.0 MiB\n"
            "last gc     none yet\n");

  CollectReport c;
  c.collection = 4;
  c.started_ns = 1'000'000'000;
  c.finished_ns = 13'500'000'000;
  c.blobs_swept = 30;
  c.bytes_swept = 1 << 20;
  c.bytes_reclaimed = 3 << 20;
  a.last_collection = c;
  a.collection_finished_at = "2024-05-01T09:00:00.000000000Z";
  a.collection_age = 3 * 3600;
  text = archive_text(a, 90, {});
  EXPECT_NE(text.find("last gc     #4 3h01m ago (2024-05-01T09:00:00.000000000Z), took 12.5s: "
                      "3.0 MiB given back, 30 blobs removed\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(read 1m30s ago, in 500ms; a watch reads the archive once a minute)"),
            std::string::npos)
      << text;

  const Json doc = archive_json(a, 90);
  EXPECT_EQ(doc.at("root"), "/srv/tw");
  EXPECT_EQ(doc.at("format"), 2);
  EXPECT_EQ(doc.at("bytes"), (3ULL << 30) + (512ULL << 20));
  EXPECT_EQ(doc.at("content_files"), 3);
  EXPECT_EQ(doc.at("live_bytes"), 2ULL << 30);
  EXPECT_EQ(doc.at("collectable_bytes"), 1ULL << 30);
  EXPECT_EQ(doc.at("age_seconds"), 90.0);
  EXPECT_EQ(doc.at("retention").at("versions"), 5000);
  EXPECT_EQ(doc.at("retention").at("versions_removed"), 120);
  EXPECT_EQ(doc.at("retention").at("paths_removed_whole"), 7);
  EXPECT_EQ(doc.at("retention").at("bytes_freed"), 256ULL << 20);
  EXPECT_EQ(doc.at("last_collection").at("collection"), 4);
  EXPECT_EQ(doc.at("last_collection").at("age_seconds"), 3 * 3600 + 90.0);
  EXPECT_EQ(doc.at("last_collection").at("seconds"), 12.5);
  EXPECT_EQ(doc.at("last_collection").at("bytes_reclaimed"), 3 << 20);
}

TEST(StatusView, AnArchiveThatCannotBeReadIsOneLine) {
  ArchiveStatus a;
  a.root = "/srv/gone";
  a.error = "no archive at /srv/gone";
  const std::string text = archive_text(a, 0, {});
  EXPECT_EQ(text, "\narchive     /srv/gone cannot be read: no archive at /srv/gone\n");
  const Json doc = archive_json(a, 0);
  EXPECT_EQ(doc.at("error"), "no archive at /srv/gone");
  EXPECT_FALSE(doc.contains("bytes"));
  // A format-1 archive is never collected, and cannot tell what a removal frees.
  ArchiveStatus old = sample_archive();
  old.format = 1;
  old.space->freed_bytes.reset();
  const std::string old_text = archive_text(old, 0, {});
  EXPECT_NE(old_text.find("in 3 objects"), std::string::npos) << old_text;
  EXPECT_NE(old_text.find("a format-1 archive is never collected"), std::string::npos) << old_text;
  EXPECT_EQ(old_text.find("freeing"), std::string::npos) << old_text;
  EXPECT_TRUE(archive_json(old, 0).at("retention").at("bytes_freed").is_null());
  // Figures that cannot be read (a catalog of an earlier release, not yet upgraded) are one
  // line; the rest is shown all the same.
  ArchiveStatus unmeasured = sample_archive();
  unmeasured.space.reset();
  unmeasured.unmeasured = "catalog of an earlier release";
  const std::string unmeasured_text = archive_text(unmeasured, 0, {});
  EXPECT_EQ(unmeasured_text,
            "\n"
            "archive     /srv/tw (format 2): its size cannot be read: catalog of an earlier "
            "release\n"
            "retention   the policy would remove 120 of 5000 versions now\n"
            "last gc     none yet\n");
  const Json unmeasured_doc = archive_json(unmeasured, 0);
  EXPECT_EQ(unmeasured_doc.at("space_error"), "catalog of an earlier release");
  EXPECT_FALSE(unmeasured_doc.contains("bytes"));
  EXPECT_EQ(unmeasured_doc.at("retention").at("versions_removed"), 120);
  EXPECT_TRUE(unmeasured_doc.at("retention").at("bytes_freed").is_null());
}

}  // namespace
}  // namespace tw::cli
